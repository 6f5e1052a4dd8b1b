package builtin

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/agentkernel/agentkernel/internal/unidiff"
	"github.com/agentkernel/agentkernel/tool"
)

// write_file and edit_file preview a call (tool.Previewer) with the plan
// their Call carries out: the same checks, the same bytes. A call the
// tool would refuse previews as refused, with the error the model would
// read; one it would perform previews as the diff of the file, exactly
// as `diff -u` prints it (internal/unidiff).

// previewMax is the largest file, before or after, shown as a diff.
const previewMax = 1 << 20

// refused is the preview of a call the tool would refuse with err.
func refused(err error) tool.Preview {
	return tool.Preview{Summary: err.Error(), Refused: true}
}

// fileChange is the change from old to updated of workspace file p,
// which exists unless created is set: a diff labelled a/p and b/p
// (/dev/null for a new file), or a note saying why there is none.
func fileChange(p string, old, updated []byte, exists bool) tool.FileChange {
	fc := tool.FileChange{Path: p, Created: !exists}
	switch {
	case exists && bytes.Equal(old, updated):
		fc.Note = "no change: the file already holds this content"
		return fc
	case looksBinary(old) || looksBinary(updated):
		fc.Note = "binary content, not shown as a diff: " + sizes(old, updated, exists)
		return fc
	case len(old) > previewMax || len(updated) > previewMax:
		fc.Note = fmt.Sprintf("too big to show as a diff (over %s): %s", humanSize(previewMax), sizes(old, updated, exists))
		return fc
	}
	from := "a/" + p
	if !exists {
		from = "/dev/null"
		fc.Note = "a new file"
		if len(updated) == 0 {
			fc.Note = "a new, empty file"
		}
	}
	d, err := unidiff.Diff(from, "b/"+p, string(old), string(updated))
	if errors.Is(err, unidiff.ErrTooCostly) {
		fc.Note = "the change is too large to show as a diff: " + sizes(old, updated, exists)
		return fc
	}
	fc.Diff = d
	if exists && len(updated) == 0 {
		fc.Note = "the file is emptied"
	}
	return fc
}

func sizes(old, updated []byte, exists bool) string {
	if !exists {
		return "a new file of " + humanSize(int64(len(updated)))
	}
	return humanSize(int64(len(old))) + " replaced by " + humanSize(int64(len(updated)))
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// readCurrent reads the workspace file p a write would replace, with the
// checks the write makes on it (a regular file, not a kernel file under
// another name), at most previewMax+1 bytes: enough to tell it is too
// big to show.
// size is the file's whole size.
func (w *workspace) readCurrent(verb, p string) (data []byte, size int64, err error) {
	f, fi, err := w.openRegular(verb, p)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if err := w.checkOpened(verb, p, fi); err != nil {
		return nil, 0, err
	}
	data, err = io.ReadAll(io.LimitReader(f, previewMax+1))
	if err != nil {
		return nil, 0, fsError(verb, p, err)
	}
	return data, max(fi.Size(), int64(len(data))), nil
}
