//go:build unix

package badger

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// countFiles counts the store's files by kind and returns the largest
// apparent size of a value log.
func countFiles(t *testing.T, dir string) (sst, vlog int, biggestVlog int64) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		switch {
		case strings.HasSuffix(e.Name(), ".sst"):
			sst++
		case strings.HasSuffix(e.Name(), ".vlog"):
			vlog++
			biggestVlog = max(biggestVlog, fi.Size())
		}
	}
	return sst, vlog, biggestVlog
}

// TestFileCountBounded runs 60 short processes' worth of open, commit (a
// 40 KiB message among small ones) and close, killing a real holder every
// 15th time: the table and value-log counts stay bounded instead of
// growing by one each per process, and no 128 MiB preallocated value log
// outlives the open after the crash.
func TestFileCountBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := t.TempDir()
	var sst, vlog int
	var biggest int64
	for r := range 60 {
		if r%15 == 14 { // a writer killed while it holds the store
			cmd := helperCmd(t, "hold", "STORE_DIR="+dir)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
				_ = cmd.Process.Kill()
				t.Fatalf("holder said %q, %v", line, err)
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		}
		s, err := Open(dir, Options{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		msgs := benchMessages(8)
		msgs[3].Content = string(make([]byte, 40<<10))
		if err := s.Commit(t.Context(), fmt.Sprintf("r%04d", r), kernel.Step{Messages: msgs, Meta: kernel.SessionMeta{Updated: time.Now()}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		sst, vlog, biggest = countFiles(t, dir)
		if sst > tableSlack+8 || vlog > 3 {
			t.Fatalf("after %d runs: %d tables, %d value logs; want at most %d and 3", r+1, sst, vlog, tableSlack+8)
		}
		if biggest > 64<<20 {
			m, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
			t.Fatalf("after %d runs a value log of %d bytes is left (%v)", r+1, biggest, m)
		}
	}
	size, files := StoreSize(dir)
	t.Logf("after 60 runs (4 killed holders): %d tables, %d value logs, %d files, %d bytes", sst, vlog, files, size)
}
