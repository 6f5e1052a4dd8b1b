package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/agentkernel/agentkernel/internal/testutil"
)

// TestStatusLineOnATerminalOnly: long store work (here made "long" by
// showing the line at once) shows a status line on a terminal's stderr,
// erased when the work ends, and writes nothing of it to a pipe.
func TestStatusLineOnATerminalOnly(t *testing.T) {
	defer func(d time.Duration) { statusAfter = d }(statusAfter)
	statusAfter = time.Nanosecond
	dir := filepath.Join(t.TempDir(), "store")
	fillStore(t, dir, map[string][2]int{"big": {200, 4 << 10}})

	// Through a pipe (a buffer): no status line.
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"sessions", "export", "big", "--store", dir}, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(errb.String(), "exporting") || strings.Contains(errb.String(), "\x1b[") {
		t.Fatalf("a status line on a pipe: %q", errb.String())
	}

	// On a terminal: the line shows, and is erased.
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var screen testutil.SyncBuffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(&screen, ptmx)
	}()
	out.Reset()
	err = run(context.Background(), []string{"sessions", "gc", "--older-than", "1d", "--store", dir}, strings.NewReader(""), &out, tty)
	tty.Close()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(screen.String(), "sessions older than 1d removed") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := screen.String()
	for _, want := range []string{"\r\x1b[Kremoving the sessions not updated for 1d · ", "\r\x1b[Kgiving the removed sessions' disk space back · "} {
		if !strings.Contains(got, want) {
			t.Errorf("the terminal lacks the status line %q:\n%q", want, got)
		}
	}
	if !strings.Contains(got, "\r\x1b[K1 sessions older than 1d removed") {
		t.Errorf("the status line was not erased before the next output:\n%q", got)
	}
}
