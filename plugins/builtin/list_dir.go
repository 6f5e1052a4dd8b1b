package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/agentkernel/agentkernel/kernel"
)

// Limits of list_dir.
const (
	listMaxDepth   = 5
	listMaxEntries = 1000
	// listCountLimit bounds how many entries a truncated listing still
	// counts to report how much it left out.
	listCountLimit = 100_000
)

// ListDir is the list_dir tool: it lists a directory of the workspace,
// optionally a few levels deep. It is safe for concurrent use.
type ListDir struct{ ws *workspace }

type listDirArgs struct {
	Path  string `json:"path"`
	Depth int    `json:"depth"`
}

// Spec describes list_dir.
func (t *ListDir) Spec() kernel.ToolSpec {
	return kernel.ToolSpec{
		Name: NameListDir,
		Description: "List a directory in the workspace. One entry per line, sorted by name, as a path relative to the " +
			"workspace root: directories end with \"/\", files show their size, symbolic links show their target. " +
			"With depth > 1 the listing descends into subdirectories (but never into .git or through symbolic links). " +
			"Long listings are cut with a marker saying how many entries were left out.",
		Schema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Directory relative to the workspace root. Default \".\", the root itself."},
    "depth": {"type": "integer", "minimum": 1, "maximum": %d, "description": "How many levels to list: 1 lists the directory's own entries. Default 1."}
  },
  "additionalProperties": false
}`, listMaxDepth)),
		Tier:   kernel.TierReadOnly,
		Tags:   []string{"fs", "read"},
		Source: Source,
	}
}

// Call lists the directory.
func (t *ListDir) Call(ctx context.Context, raw json.RawMessage) (kernel.Result, error) {
	var a listDirArgs
	if err := decodeArgs(raw, &a); err != nil {
		return kernel.Result{}, err
	}
	if a.Depth < 0 || a.Depth > listMaxDepth {
		return kernel.Result{}, invalidArg("depth", "must be between 1 and %d", listMaxDepth)
	}
	if a.Depth == 0 {
		a.Depth = 1
	}
	p, err := clean(a.Path)
	if err != nil {
		return kernel.Result{}, err
	}
	fi, err := t.ws.root.Stat(p)
	if err != nil {
		return kernel.Result{}, fsError("list", p, err)
	}
	if !fi.IsDir() {
		return kernel.Result{}, fmt.Errorf("list %q: not a directory (%s); use read_file to read a file", p, humanSize(fi.Size()))
	}
	l := lister{ws: t.ws, ctx: ctx, maxBytes: t.ws.maxOutput}
	if err := l.walk(p, a.Depth); err != nil {
		return kernel.Result{}, err
	}
	if l.total == 0 {
		return kernel.Result{Content: fmt.Sprintf("[list_dir: %q is empty]", p)}, nil
	}
	out := l.out.String()
	if l.shown < l.total {
		more := fmt.Sprintf("%d", l.total-l.shown)
		if l.total >= listCountLimit {
			more = "more than " + more
		}
		out += fmt.Sprintf("[list_dir: showed %d entries; %s more not shown. List a subdirectory or use a smaller depth.]", l.shown, more)
	}
	return kernel.Result{Content: out}, nil
}

type lister struct {
	ws       *workspace
	ctx      context.Context
	maxBytes int
	out      strings.Builder
	shown    int
	total    int
	full     bool
}

// walk lists dir and, depth permitting, its subdirectories, depth first in
// name order.
func (l *lister) walk(dir string, depth int) error {
	if err := l.ctx.Err(); err != nil {
		return fmt.Errorf("list %q: %w", dir, err)
	}
	entries, err := fs.ReadDir(l.ws.root.FS(), dir)
	if err != nil {
		return fsError("list", dir, err)
	}
	// Root.FS().ReadDir returns entries sorted by name.
	for _, e := range entries {
		if l.total >= listCountLimit {
			return nil
		}
		rel := path.Join(dir, e.Name())
		descend := e.IsDir() && depth > 1 && e.Name() != ".git"
		l.emit(l.describe(rel, e, e.IsDir() && depth > 1 && !descend))
		if descend {
			if err := l.walk(rel, depth-1); err != nil {
				// An unreadable subdirectory is noted, not fatal.
				if l.ctx.Err() != nil {
					return err
				}
				l.note(fmt.Sprintf("  [%s/ is unreadable: %v]", rel, err))
			}
		}
	}
	return nil
}

// emit adds one entry line unless the listing is already full.
func (l *lister) emit(line string) {
	l.total++
	if l.full || l.shown >= listMaxEntries || l.out.Len()+len(line)+1 > l.maxBytes {
		l.full = true
		return
	}
	l.out.WriteString(line)
	l.out.WriteByte('\n')
	l.shown++
}

// note adds a line that is not an entry, if there is room.
func (l *lister) note(line string) {
	if !l.full && l.out.Len()+len(line)+1 <= l.maxBytes {
		l.out.WriteString(line)
		l.out.WriteByte('\n')
	}
}

func (l *lister) describe(rel string, e fs.DirEntry, skipped bool) string {
	switch t := e.Type(); {
	case e.IsDir():
		if skipped {
			return rel + "/  [not expanded]"
		}
		return rel + "/"
	case t&fs.ModeSymlink != 0:
		target, err := l.ws.root.Readlink(rel)
		if err != nil {
			return rel + " -> ?  [symlink, unreadable]"
		}
		fi, err := l.ws.root.Stat(rel)
		switch {
		case err != nil && isEscape(err):
			return fmt.Sprintf("%s -> %s  [symlink outside the workspace, not accessible]", rel, target)
		case err != nil:
			return fmt.Sprintf("%s -> %s  [broken symlink]", rel, target)
		case fi.IsDir():
			return fmt.Sprintf("%s -> %s/", rel, target)
		}
		return fmt.Sprintf("%s -> %s  %s", rel, target, humanSize(fi.Size()))
	case t.IsRegular():
		fi, err := e.Info()
		if err != nil {
			return rel
		}
		return rel + "  " + humanSize(fi.Size())
	default:
		return fmt.Sprintf("%s  [%s]", rel, fileKind(t))
	}
}

var _ kernel.Tool = (*ListDir)(nil)
