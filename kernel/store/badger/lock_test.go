//go:build unix

package badger

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/agentkernel/agentkernel/kernel"
)

// TestSecondProcess: a second process opening a store another process
// holds fails cleanly, with an error naming the directory and the holder;
// the store is intact, and once the holder dies (even by SIGKILL) the
// store opens again.
func TestSecondProcess(t *testing.T) {
	dir := t.TempDir()

	t.Run("this process holds it", func(t *testing.T) {
		s := openAt(t, dir, Options{})
		commitN(t, s, "kept", 3, kernel.SessionMeta{})
		cmd := helperCmd(t, "open", "STORE_DIR="+dir)
		out, err := cmd.Output()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 4 {
			t.Fatalf("helper exit %v, want 4 (ErrLocked); output %q", err, out)
		}
		want := fmt.Sprintf("open session store %s: store is locked: another kernel (pid %d, %q) holds it; wait for it to finish or use another store directory", dir, os.Getpid(), commandOf(os.Getpid()))
		if got := strings.TrimSpace(string(out)); got != want {
			t.Fatalf("the second process said\n%q\nwant\n%q", got, want)
		}
		// A reader gets a snapshot instead.
		out, err = helperCmd(t, "open", "STORE_DIR="+dir, "READ_ONLY=1").Output()
		if err != nil || string(out) != "kept 3\n" {
			t.Fatalf("a read-only second process: %v, said %q; want %q", err, out, "kept 3\n")
		}
		if se, err := s.Load(t.Context(), "kept"); err != nil || len(se.Messages) != 3 {
			t.Fatalf("after the second process: %v", err)
		}
	})

	t.Run("another process holds it", func(t *testing.T) {
		cmd := helperCmd(t, "hold", "STORE_DIR="+dir)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
			_ = cmd.Process.Kill()
			t.Fatalf("helper said %q, %v", line, err)
		}
		_, err = Open(dir, Options{Logger: quietLogger()})
		want := fmt.Sprintf("another kernel (pid %d, %q) holds it", cmd.Process.Pid, commandOf(cmd.Process.Pid))
		if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), dir) {
			_ = cmd.Process.Kill()
			t.Fatalf("Open while another process holds the store = %v, want ErrLocked naming %s and %q", err, dir, want)
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()

		// The holder died without closing: Badger cannot open the store
		// read-only (its log needs recovery), so a reader gets a snapshot,
		// and no file of the store changes.
		before := listing(t, dir)
		r := openAt(t, dir, Options{ReadOnly: true})
		if r.snapshot == "" {
			t.Fatal("a read-only Open of an unclean store did not use a snapshot")
		}
		if se, err := r.Load(t.Context(), "kept"); err != nil || len(se.Messages) != 3 {
			t.Fatalf("read-only after the holder was killed: %v", err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if after := listing(t, dir); after != before {
			t.Fatalf("a read-only Open changed the store:\nbefore %s\nafter  %s", before, after)
		}

		s := openAt(t, dir, Options{}) // the kernel released the dead holder's lock
		if se, err := s.Load(t.Context(), "kept"); err != nil || len(se.Messages) != 3 {
			t.Fatalf("after the holder was killed: %v", err)
		}
	})
}

// listing describes every file of dir: name, size and modification time.
func listing(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%d:%d ", e.Name(), fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

// TestEmptyLogFiles: a process killed between creating a log file and
// sizing it leaves an empty .vlog or .mem file, and Badger's next Open of
// the store fails. A reader reads a snapshot without it (and without
// touching the store); a writer removes it (it holds nothing) and opens.
func TestEmptyLogFiles(t *testing.T) {
	damaged := func(t *testing.T, name string) string {
		dir := t.TempDir()
		s := openAt(t, dir, Options{})
		commitN(t, s, "kept", 3, kernel.SessionMeta{})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, name := range []string{"000099.vlog", "000099.mem"} {
		t.Run(name, func(t *testing.T) {
			if db, err := bdg.Open(bdg.DefaultOptions(damaged(t, name)).WithLogger(nil)); err == nil {
				_ = db.Close()
				t.Fatalf("Badger opens a store with an empty %s: the repair is no longer needed", name)
			}
			dir := damaged(t, name)
			before := listing(t, dir)
			r := openAt(t, dir, Options{ReadOnly: true})
			if se, err := r.Load(t.Context(), "kept"); err != nil || len(se.Messages) != 3 {
				t.Fatalf("read-only with an empty %s: %v", name, err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if after := listing(t, dir); after != before {
				t.Fatalf("a read-only Open changed the store:\nbefore %s\nafter  %s", before, after)
			}
			s := openAt(t, dir, Options{})
			if se, err := s.Load(t.Context(), "kept"); err != nil || len(se.Messages) != 3 {
				t.Fatalf("after the repair: %v", err)
			}
		})
	}
}
