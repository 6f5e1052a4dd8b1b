package builtin

import (
	"encoding/json"
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentkernel/agentkernel/kernel"
)

// maxLinkHops bounds the symbolic links one path may go through.
const maxLinkHops = 40

// resolve returns the real path p names inside the root, slash-separated
// and relative to it: every symbolic link on the way followed (each must
// stay inside the root), "." and ".." applied. Components that do not exist
// yet are taken as they are. ok is false when p cannot be resolved inside
// the root (absolute, climbing out, a link loop, an unreadable link); the
// caller then leaves p as typed and the tool refuses it when it runs.
func (w *workspace) resolve(p string) (real string, ok bool) {
	c, err := clean(p)
	if err != nil {
		return "", false
	}
	var rest []string
	if c != "." {
		rest = strings.Split(c, "/")
	}
	var done []string
	hops, missing := 0, false
	for len(rest) > 0 {
		comp := rest[0]
		rest = rest[1:]
		switch comp {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", false
			}
			done = done[:len(done)-1]
			continue
		}
		if missing {
			done = append(done, comp)
			continue
		}
		cur := path.Join(append(done, comp)...)
		fi, err := w.root.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			missing = true
			done = append(done, comp)
			continue
		case err != nil:
			return "", false
		case fi.Mode()&fs.ModeSymlink == 0:
			done = append(done, comp)
			continue
		}
		if hops++; hops > maxLinkHops {
			return "", false
		}
		target, err := w.root.Readlink(cur)
		if err != nil || target == "" || path.IsAbs(target) || filepath.IsAbs(target) {
			return "", false
		}
		rest = append(strings.Split(filepath.ToSlash(target), "/"), rest...)
	}
	if len(done) == 0 {
		return ".", true
	}
	return path.Join(done...), true
}

// resolveArgs implements kernel.PathResolver for a tool whose only path
// argument is "path"; touched adds paths the call will touch besides.
func (w *workspace) resolveArgs(raw json.RawMessage, touched func(real string, args map[string]any) []string) (kernel.PathResolution, error) {
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil {
		return kernel.PathResolution{}, err
	}
	typed, _ := args["path"].(string)
	real, ok := w.resolve(typed)
	if !ok {
		return kernel.PathResolution{}, &EscapeError{Path: typed, Reason: "it does not resolve inside the workspace"}
	}
	var res kernel.PathResolution
	if touched != nil {
		res.Touched = touched(real, args)
	}
	if typed == "" || real == typed {
		return res, nil
	}
	args["path"] = real
	b, err := json.Marshal(args)
	if err != nil {
		return kernel.PathResolution{}, err
	}
	res.Args, res.Typed = b, map[string]string{"path": typed}
	return res, nil
}

// ResolvePaths implements kernel.PathResolver.
func (t *ReadFile) ResolvePaths(args json.RawMessage) (kernel.PathResolution, error) {
	return t.ws.resolveArgs(args, nil)
}

// ResolvePaths implements kernel.PathResolver.
func (t *ListDir) ResolvePaths(args json.RawMessage) (kernel.PathResolution, error) {
	return t.ws.resolveArgs(args, nil)
}

// ResolvePaths implements kernel.PathResolver.
func (t *WriteFile) ResolvePaths(args json.RawMessage) (kernel.PathResolution, error) {
	return t.ws.resolveArgs(args, nil)
}

// ResolvePaths implements kernel.PathResolver.
func (t *EditFile) ResolvePaths(args json.RawMessage) (kernel.PathResolution, error) {
	return t.ws.resolveArgs(args, nil)
}

// ResolvePaths implements kernel.PathResolver. With a glob, the files the
// glob selects are touched paths, so a rule about ".env" files sees a
// search for ".env*". When there are more than globFiles lists, the search
// refuses to run (Search.Call), so it never reads a file policy did not see.
func (t *Search) ResolvePaths(args json.RawMessage) (kernel.PathResolution, error) {
	return t.ws.resolveArgs(args, func(real string, a map[string]any) []string {
		glob, _ := a["glob"].(string)
		if glob == "" {
			return nil
		}
		files, _ := t.ws.globFiles(real, glob)
		return files
	})
}

var (
	_ kernel.PathResolver = (*ReadFile)(nil)
	_ kernel.PathResolver = (*ListDir)(nil)
	_ kernel.PathResolver = (*Search)(nil)
	_ kernel.PathResolver = (*WriteFile)(nil)
	_ kernel.PathResolver = (*EditFile)(nil)
)
