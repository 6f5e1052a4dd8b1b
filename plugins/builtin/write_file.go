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
	"github.com/agentkernel/agentkernel/tool"
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

// writePlan is a write as write_file would make it. Call writes it;
// Preview shows it. Both get it from plan, so they cannot disagree.
type writePlan struct {
	p       string
	content []byte
	prev    int64 // the current file's size; -1 when there is none
}

// plan checks a write_file call, or returns the error the call fails
// with. The caller holds ws.writeMu.
func (t *WriteFile) plan(ctx context.Context, raw json.RawMessage) (writePlan, error) {
	var a writeFileArgs
	if err := decodeArgs(raw, &a); err != nil {
		return writePlan{}, err
	}
	switch {
	case a.Path == "":
		return writePlan{}, invalidArg("path", "is required")
	case a.Content == nil:
		return writePlan{}, invalidArg("content", "is required")
	case len(*a.Content) > t.ws.maxFile:
		return writePlan{}, invalidArg("content", "is %d bytes, over the limit of %d bytes", len(*a.Content), t.ws.maxFile)
	}
	p, err := clean(a.Path)
	if err != nil {
		return writePlan{}, err
	}
	if p == "." {
		return writePlan{}, invalidArg("path", "names the workspace root; give a file path")
	}
	if err := t.ws.refuseProtected("write", p); err != nil {
		return writePlan{}, err
	}
	if err := ctx.Err(); err != nil {
		return writePlan{}, fmt.Errorf("write %q: %w", p, err)
	}

	pl := writePlan{p: p, content: []byte(*a.Content), prev: -1}
	switch fi, err := t.ws.root.Stat(p); {
	case err == nil && fi.IsDir():
		return writePlan{}, fmt.Errorf("write %q: it is a directory", p)
	case err == nil && !fi.Mode().IsRegular():
		return writePlan{}, fmt.Errorf("write %q: not a regular file (%s)", p, fileKind(fi.Mode()))
	case err == nil:
		if err := t.ws.checkOpened("write", p, fi); err != nil {
			return writePlan{}, err
		}
		pl.prev = fi.Size()
	case !errors.Is(err, fs.ErrNotExist):
		return writePlan{}, fsError("write", p, err)
	}
	return pl, nil
}

// Call writes the file.
func (t *WriteFile) Call(ctx context.Context, raw json.RawMessage) (kernel.Result, error) {
	t.ws.writeMu.Lock()
	defer t.ws.writeMu.Unlock()
	pl, err := t.plan(ctx, raw)
	if err != nil {
		return kernel.Result{}, err
	}
	if dir := path.Dir(pl.p); dir != "." {
		if err := t.ws.root.MkdirAll(dir, 0o755); err != nil {
			return kernel.Result{}, fsError("create directory", dir, err)
		}
	}
	if err := t.ws.writeRegular(ctx, "write", pl.p, pl.content); err != nil {
		return kernel.Result{}, err
	}
	what := "created"
	if pl.prev >= 0 {
		what = fmt.Sprintf("replaced %d bytes", pl.prev)
	}
	return kernel.Result{Content: fmt.Sprintf("wrote %d bytes to %s (%s)", len(pl.content), pl.p, what)}, nil
}

// Preview shows the write a call would make: the diff of the file
// against the content written, or the error the call would fail with.
// It only reads.
func (t *WriteFile) Preview(ctx context.Context, raw json.RawMessage) (tool.Preview, error) {
	if err := ctx.Err(); err != nil {
		return tool.Preview{}, err
	}
	t.ws.writeMu.Lock()
	defer t.ws.writeMu.Unlock()
	pl, err := t.plan(ctx, raw)
	if err != nil {
		return refused(err), nil
	}
	n := humanSize(int64(len(pl.content)))
	if pl.prev < 0 {
		return tool.Preview{Summary: fmt.Sprintf("create %s (%s)", pl.p, n),
			Files: []tool.FileChange{fileChange(pl.p, nil, pl.content, false)}}, nil
	}
	old, size, err := t.ws.readCurrent("write", pl.p)
	if err != nil {
		return refused(err), nil
	}
	sum := fmt.Sprintf("replace %s (%s → %s)", pl.p, humanSize(size), n)
	if size > previewMax {
		return tool.Preview{Summary: sum, Files: []tool.FileChange{{Path: pl.p,
			Note: fmt.Sprintf("too big to show as a diff (over %s): %s replaced by %s", humanSize(previewMax), humanSize(size), n)}}}, nil
	}
	return tool.Preview{Summary: sum, Files: []tool.FileChange{fileChange(pl.p, old, pl.content, true)}}, nil
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

var (
	_ kernel.Tool    = (*WriteFile)(nil)
	_ tool.Previewer = (*WriteFile)(nil)
)
