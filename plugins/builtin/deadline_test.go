package builtin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hugeLine makes a sparse file that is one line of text followed by 64 GiB
// without a newline: reading it whole takes far longer than any deadline
// the tests set.
func hugeLine(t *testing.T, dir, name string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Repeat("a", 16<<10)); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 30); err != nil {
		t.Skipf("no sparse files here: %v", err)
	}
}

// TestReadDeadlineInsideOneLine: the call's deadline is honoured inside a
// single line; before the fix the deadline was checked between lines only
// and read_file returned success after reading the whole file.
func TestReadDeadlineInsideOneLine(t *testing.T) {
	e := newEnv(t, Config{})
	hugeLine(t, e.root, "huge.txt")
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := e.callCtx(ctx, t, NameReadFile, map[string]any{"path": "huge.txt"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read_file of a huge single line under a deadline: err = %v, want the deadline", err)
	}
}

// TestReadCountCapped: a file that will be truncated is not read to its end
// to count its lines: with a generous deadline the call still returns
// promptly, saying the rest was not counted.
func TestReadCountCapped(t *testing.T) {
	e := newEnv(t, Config{})
	dir := e.root
	f, err := os.Create(filepath.Join(dir, "big.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strings.Repeat("line\n", 3000)); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 30); err != nil {
		t.Skipf("no sparse files here: %v", err)
	}
	f.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	res, err := e.callCtx(ctx, t, NameReadFile, map[string]any{"path": "big.txt", "limit": 10})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Content, "lines not counted") {
		t.Fatalf("content:\n%s", res.Content)
	}
}

// cancelling is an endless reader that cancels its context on the first
// read, so the deadline falls inside a single read.
type cancelling struct{ cancel context.CancelFunc }

func (c cancelling) Read(p []byte) (int, error) {
	c.cancel()
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// TestSearchReadChecksContext: search's file read checks the context per
// chunk, and a cancelled scan ends the walk with the context's error.
func TestSearchReadChecksContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := readFull(ctx, cancelling{cancel}, make([]byte, 1024), 1<<40)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("readFull of an endless file after cancellation: err = %v", err)
	}
}

// TestWriteChecksContextPerChunk: a write cut by the deadline stops between
// chunks and says the file is incomplete.
func TestWriteChecksContextPerChunk(t *testing.T) {
	e := newEnv(t, Config{})
	ws, err := newWorkspace(Config{Root: e.root})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.root.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = ws.writeRegular(ctx, "write", "big.txt", make([]byte, 3*readChunk))
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "incomplete") {
		t.Fatalf("write under a cancelled context: %v", err)
	}
}
