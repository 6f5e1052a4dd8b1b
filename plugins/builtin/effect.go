package builtin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// After a crash, write_file and edit_file tell whether an interrupted
// call ran (kernel.SideEffectChecker), from the file itself: its content
// against what the call writes, and its modification time against the
// start of the call's round. They answer "unknown" whenever the file
// changed after the round started but not into what the call writes
// (another writer, a torn write, arguments a hook rewrote).

// readForCheck reads workspace file p (at most the write limit) and its
// modification time; exists is false when there is no such file.
func (ws *workspace) readForCheck(p string) (data []byte, mod time.Time, exists bool, err error) {
	fi, err := ws.root.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, time.Time{}, false, nil
	}
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > int64(ws.maxFile) {
		return nil, time.Time{}, true, fmt.Errorf("cannot check %q", p)
	}
	f, err := ws.root.Open(p)
	if err != nil {
		return nil, time.Time{}, true, err
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, int64(ws.maxFile)+1))
	return data, fi.ModTime(), true, err
}

// CheckSideEffect tells whether an interrupted write_file call ran: the file
// holds exactly the content it writes (completed), or is absent or not
// modified since the round started (did not run).
func (t *WriteFile) CheckSideEffect(ctx context.Context, raw json.RawMessage, since time.Time) (kernel.SideEffect, string) {
	var a writeFileArgs
	if decodeArgs(raw, &a) != nil || a.Content == nil {
		return kernel.SideEffectUnknown, ""
	}
	p, err := clean(a.Path)
	if err != nil || p == "." || ctx.Err() != nil {
		return kernel.SideEffectUnknown, ""
	}
	data, mod, exists, err := t.ws.readForCheck(p)
	if err != nil {
		return kernel.SideEffectUnknown, ""
	}
	want := sha256.Sum256([]byte(*a.Content))
	switch {
	case exists && sha256.Sum256(data) == want:
		return kernel.SideEffectCompleted, fmt.Sprintf("%s holds the %d bytes this call writes (sha256 %x)", p, len(*a.Content), want[:8])
	case !exists:
		return kernel.SideEffectNotRun, fmt.Sprintf("%s does not exist", p)
	case !since.IsZero() && mod.Before(since):
		return kernel.SideEffectNotRun, fmt.Sprintf("%s differs from what this call writes and was last modified %s, before the call was made", p, mod.UTC().Format(time.RFC3339))
	}
	return kernel.SideEffectUnknown, ""
}

// CheckSideEffect tells whether an interrupted edit_file call ran: old is
// gone and new is there, in a file modified since the round started
// (completed), or the file was not modified since then (did not run).
func (t *EditFile) CheckSideEffect(ctx context.Context, raw json.RawMessage, since time.Time) (kernel.SideEffect, string) {
	var a editFileArgs
	if decodeArgs(raw, &a) != nil || a.New == nil || a.Old == "" || ctx.Err() != nil {
		return kernel.SideEffectUnknown, ""
	}
	p, err := clean(a.Path)
	if err != nil {
		return kernel.SideEffectUnknown, ""
	}
	data, mod, exists, err := t.ws.readForCheck(p)
	if err != nil || !exists || since.IsZero() {
		return kernel.SideEffectUnknown, ""
	}
	if mod.Before(since) {
		return kernel.SideEffectNotRun, fmt.Sprintf("%s was last modified %s, before the call was made", p, mod.UTC().Format(time.RFC3339))
	}
	for _, v := range [][2]string{{a.Old, *a.New}, {toCRLF(a.Old), toCRLF(*a.New)}} {
		old, repl := v[0], v[1]
		if !bytes.Contains(data, []byte(old)) && (repl == "" || bytes.Contains(data, []byte(repl))) && !strings.Contains(repl, old) {
			return kernel.SideEffectCompleted, fmt.Sprintf("%s no longer holds the old text and holds the new one", p)
		}
	}
	return kernel.SideEffectUnknown, ""
}

var (
	_ kernel.SideEffectChecker = (*WriteFile)(nil)
	_ kernel.SideEffectChecker = (*EditFile)(nil)
)
