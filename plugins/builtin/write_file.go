package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"

	"github.com/agentkernel/agentkernel/kernel"
)

// WriteFile is the write_file tool: it creates or replaces a file of the
// workspace, creating missing parent directories. It is safe for
// concurrent use; writes are serialised.
type WriteFile struct{ ws *workspace }

type writeFileArgs struct {
	Path    string  `json:"path"`
	Content *string `json:"content"`
}

// Spec describes write_file.
func (t *WriteFile) Spec() kernel.ToolSpec {
	return kernel.ToolSpec{
		Name: NameWriteFile,
		Description: "Create a file in the workspace, or replace its whole content, with the given text. Missing parent " +
			"directories are created. Reports the number of bytes written. To change part of an existing file, " +
			"prefer edit_file.",
		Schema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File path relative to the workspace root, e.g. \"docs/notes.md\"."},
    "content": {"type": "string", "maxLength": %d, "description": "The complete new content of the file."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`, t.ws.maxFile)),
		Tier:   kernel.TierSideEffecting,
		Tags:   []string{"fs", "write"},
		Source: Source,
	}
}

// Call writes the file.
func (t *WriteFile) Call(ctx context.Context, raw json.RawMessage) (kernel.Result, error) {
	var a writeFileArgs
	if err := decodeArgs(raw, &a); err != nil {
		return kernel.Result{}, err
	}
	switch {
	case a.Path == "":
		return kernel.Result{}, invalidArg("path", "is required")
	case a.Content == nil:
		return kernel.Result{}, invalidArg("content", "is required")
	case len(*a.Content) > t.ws.maxFile:
		return kernel.Result{}, invalidArg("content", "is %d bytes, over the limit of %d bytes", len(*a.Content), t.ws.maxFile)
	}
	p, err := clean(a.Path)
	if err != nil {
		return kernel.Result{}, err
	}
	if p == "." {
		return kernel.Result{}, invalidArg("path", "names the workspace root; give a file path")
	}
	t.ws.writeMu.Lock()
	defer t.ws.writeMu.Unlock()
	if err := t.ws.refuseProtected("write", p); err != nil {
		return kernel.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return kernel.Result{}, fmt.Errorf("write %q: %w", p, err)
	}

	prev := int64(-1)
	switch fi, err := t.ws.root.Stat(p); {
	case err == nil && fi.IsDir():
		return kernel.Result{}, fmt.Errorf("write %q: it is a directory", p)
	case err == nil && !fi.Mode().IsRegular():
		return kernel.Result{}, fmt.Errorf("write %q: not a regular file (%s)", p, fileKind(fi.Mode()))
	case err == nil:
		prev = fi.Size()
	case !errors.Is(err, fs.ErrNotExist):
		return kernel.Result{}, fsError("write", p, err)
	}
	if dir := path.Dir(p); dir != "." {
		if err := t.ws.root.MkdirAll(dir, 0o755); err != nil {
			return kernel.Result{}, fsError("create directory", dir, err)
		}
	}
	if err := t.ws.writeRegular(ctx, "write", p, []byte(*a.Content)); err != nil {
		return kernel.Result{}, err
	}
	what := "created"
	if prev >= 0 {
		what = fmt.Sprintf("replaced %d bytes", prev)
	}
	return kernel.Result{Content: fmt.Sprintf("wrote %d bytes to %s (%s)", len(*a.Content), p, what)}, nil
}

// writeRegular writes data to p in place (keeping its mode, and writing
// through a symbolic link that stays inside the root), creating it 0644.
// O_NONBLOCK keeps a FIFO swapped in at p from blocking the call. The file
// is truncated only once it is known to be a regular file and none of the
// kernel's own files (a hard link to one, say). The data goes out in
// chunks with a check of ctx before each; a write cut by the deadline
// leaves a partial file and says so.
func (w *workspace) writeRegular(ctx context.Context, verb, p string, data []byte) error {
	f, err := w.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|oNonblock, 0o644)
	if err != nil {
		return fsError(verb, p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fsError(verb, p, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("%s %q: not a regular file (%s)", verb, p, fileKind(fi.Mode()))
	}
	if err := w.checkOpened(verb, p, fi); err != nil {
		f.Close()
		return err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return fsError(verb, p, err)
	}
	for off := 0; off < len(data) || off == 0; {
		if err := ctx.Err(); err != nil {
			f.Close()
			return fmt.Errorf("write %q: stopped after %d of %d bytes, the file is incomplete: %w", p, off, len(data), err)
		}
		end := min(len(data), off+readChunk)
		if _, err := f.Write(data[off:end]); err != nil {
			f.Close()
			return fsError(verb, p, err)
		}
		if end == off {
			break
		}
		off = end
	}
	if err := f.Close(); err != nil {
		return fsError(verb, p, err)
	}
	return nil
}

var _ kernel.Tool = (*WriteFile)(nil)
