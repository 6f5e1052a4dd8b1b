package bleveindex_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/badger"
	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/memory/bleveindex"
)

const crashEnv = "MEMORY_CRASH_HELPER_DIR"

// TestMain runs the crash helper when the test binary is started as one.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashHelper(dir)
		return
	}
	os.Exit(m.Run())
}

// crashHelper commits steps to a Badger store and indexes them through
// the indexer, forever, printing the number of each step it committed;
// the test kills it with SIGKILL.
func crashHelper(dir string) {
	st, err := badger.Open(filepath.Join(dir, "store"), badger.Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	ix, err := bleveindex.Open(filepath.Join(dir, "memory"))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	in := memory.NewIndexer(memory.IndexerConfig{Index: ix, Store: st, Queue: 8})
	ctx := context.Background()
	go in.Run(ctx)
	for n := 1; ; n++ {
		sid := fmt.Sprintf("s%d", n%3)
		seq := uint64(n/3 + 1)
		if n%3 == 0 {
			seq = uint64(n / 3)
		}
		m := kernel.Message{Seq: seq, Role: kernel.RoleUser, Time: time.Now(), Content: fmt.Sprintf("entry e%d of the zebra log", seq)}
		meta := kernel.SessionMeta{ID: sid, LastSeq: seq, Created: time.Now(), Updated: time.Now()}
		if err := st.Commit(ctx, sid, kernel.Step{Messages: []kernel.Message{m}, Meta: meta}); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		in.Offer(sid, meta, []kernel.Message{m})
		fmt.Println("committed", n)
	}
}

// TestKillDuringIndexing: the process indexing a Badger store's steps is
// killed with SIGKILL mid-way; on open the index is readable (or moved
// aside and rebuilt), and after the indexer's catch-up every stored
// message is found exactly once and every mark equals the session's
// LastSeq.
func TestKillDuringIndexing(t *testing.T) {
	for round := 0; round < 3; round++ {
		t.Run(fmt.Sprintf("round%d", round), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashEnv+"="+dir)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(out)
			want := 150 + 100*round
			for sc.Scan() {
				line := sc.Text()
				if strings.HasPrefix(line, "error") {
					t.Fatal(line)
				}
				var n int
				if _, err := fmt.Sscanf(line, "committed %d", &n); err == nil && n >= want {
					break
				}
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()

			st, err := badger.Open(filepath.Join(dir, "store"), badger.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ix, err := bleveindex.Open(filepath.Join(dir, "memory"))
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			in := memory.NewIndexer(memory.IndexerConfig{Index: ix, Store: st})
			ctx := context.Background()
			if err := in.CatchUp(ctx); err != nil {
				t.Fatal(err)
			}
			metas, err := st.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(metas) != 3 {
				t.Fatalf("%d sessions stored", len(metas))
			}
			for _, m := range metas {
				mark, err := ix.Mark(ctx, m.ID)
				if err != nil || mark != m.LastSeq {
					t.Fatalf("session %s: mark %d, LastSeq %d (%v)", m.ID, mark, m.LastSeq, err)
				}
				hs, err := ix.SearchText(ctx, memory.Scope{Kind: memory.ScopeSession, SessionID: m.ID}, "zebra", 100000)
				if err != nil {
					t.Fatal(err)
				}
				seen := map[uint64]bool{}
				for _, h := range hs {
					if seen[h.Chunk.Seq] {
						t.Fatalf("session %s: message %d indexed twice", m.ID, h.Chunk.Seq)
					}
					seen[h.Chunk.Seq] = true
				}
				if uint64(len(seen)) != m.LastSeq {
					t.Fatalf("session %s: %d messages found, %d stored", m.ID, len(seen), m.LastSeq)
				}
			}
		})
	}
}
