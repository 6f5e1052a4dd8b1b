//go:build unix

package postgres_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
	"github.com/agentkernel/agentkernel/memory"
)

// The crash test re-runs the test binary as the indexing process (the
// go-plugin TestHelperProcess pattern): a real process, killed with -9.
const memoryHelperEnv = "AGENTKERNEL_PG_MEMORY_HELPER"

// memoryParts is how many chunks each indexed message has: a batch is one
// message's chunks and its session's mark.
const memoryParts = 3

// memoryWord is the word only chunk (session, seq, part) holds.
func memoryWord(sid string, seq uint64, part int) string {
	return fmt.Sprintf("zq%sx%dx%d", sid, seq, part)
}

// TestMemoryIndexHelper is not a test: it is the indexing process's main.
// It adds batches to the index at $DSN for ever, session after session,
// and reports each acknowledged batch on stdout ("ack <session> <seq>")
// after Add returned.
func TestMemoryIndexHelper(t *testing.T) {
	if os.Getenv(memoryHelperEnv) == "" {
		t.Skip("helper process only")
	}
	ctx := context.Background()
	s, err := postgres.Open(ctx, os.Getenv("DSN"), postgres.Options{RetryFor: 30 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	ix := s.MemoryIndex()
	prefix := os.Getenv("PREFIX")
	filler := strings.Repeat("harbour pilots read the tide tables before dawn. ", 40)
	for n := 0; ; n++ {
		sid := fmt.Sprintf("%s%d", prefix, n%4)
		seq := uint64(n/4 + 1)
		var b memory.Batch
		for p := 0; p < memoryParts; p++ {
			b.Chunks = append(b.Chunks, memory.Chunk{
				ID: memory.ChunkID(sid, seq, p), SessionID: sid, Owner: "ann", Seq: seq, Part: p, Role: "tool",
				Time: time.Now(), Text: memoryWord(sid, seq, p) + " " + filler,
				Vector: []float32{float32(seq), float32(p + 1), 1},
			})
		}
		b.Marks = map[string]uint64{sid: seq}
		if err := ix.Add(ctx, b); err != nil {
			fmt.Fprintln(os.Stderr, "helper: add:", err)
			os.Exit(3)
		}
		fmt.Printf("ack %s %d\n", sid, seq)
	}
}

// startIndexer starts the helper on dsn and returns it with a channel of
// its acknowledgements, closed when its output ends.
func startIndexer(t *testing.T, dsn, prefix string) (*exec.Cmd, <-chan [2]string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryIndexHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), memoryHelperEnv+"=1", "DSN="+dsn, "PREFIX="+prefix, "GORACE=atexit_sleep_ms=0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acks := make(chan [2]string, 1024)
	go func() {
		defer close(acks)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 3 && f[0] == "ack" {
				acks <- [2]string{f[1], f[2]}
			}
		}
	}()
	return cmd, acks
}

// TestMemoryIndexKill9: the indexing process is killed with -9 in the
// middle of its batches, and then the PostgreSQL server is killed with -9
// under a second indexing process. Afterwards every acknowledged batch is
// there whole, no batch is there in part (each session's chunks are
// exactly the parts of seqs 1..mark), and the full-text index agrees with
// the table: each chunk's own word finds it and only it.
func TestMemoryIndexKill9(t *testing.T) {
	srv, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		pgtest.Shared(t)
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	dsn := srv.Migrated(t)
	acked := map[string]uint64{}
	drain := func(acks <-chan [2]string, n int) {
		for i := 0; n < 0 || i < n; i++ {
			a, ok := <-acks
			if !ok {
				if n < 0 {
					return
				}
				t.Fatalf("the indexer ended after %d acknowledgements", i)
			}
			seq, _ := strconv.ParseUint(a[1], 10, 64)
			acked[a[0]] = max(acked[a[0]], seq)
		}
	}

	// 1. The indexing process dies, three times, at different points.
	for i, prefix := range []string{"a", "c", "d"} {
		cmd, acks := startIndexer(t, dsn, prefix)
		drain(acks, 20+15*i)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		drain(acks, -1)
	}

	// 2. The database dies under an indexing process.
	cmd, acks := startIndexer(t, dsn, "b")
	drain(acks, 40)
	srv.Kill()
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	drain(acks, -1)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	s, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ix := s.MemoryIndex()
	var total int64
	for _, prefix := range []string{"a", "b", "c", "d"} {
		for i := 0; i < 4; i++ {
			sid := fmt.Sprintf("%s%d", prefix, i)
			mark, err := ix.Mark(ctx, sid)
			if err != nil {
				t.Fatal(err)
			}
			if mark < acked[sid] {
				t.Errorf("session %s: mark %d, but batch %d was acknowledged", sid, mark, acked[sid])
			}
			total += int64(mark) * memoryParts
			for seq := uint64(1); seq <= mark+1; seq++ {
				for p := 0; p < memoryParts; p++ {
					hits, err := ix.SearchText(ctx, memory.Scope{Kind: memory.ScopeSession, SessionID: sid, Owner: "ann"}, memoryWord(sid, seq, p), 5)
					if err != nil {
						t.Fatal(err)
					}
					switch {
					case seq <= mark && (len(hits) != 1 || hits[0].Chunk.ID != memory.ChunkID(sid, seq, p)):
						t.Errorf("session %s seq %d part %d (mark %d): its word finds %d hits", sid, seq, p, mark, len(hits))
					case seq > mark && len(hits) != 0:
						t.Errorf("session %s seq %d part %d is indexed past the mark %d: a batch in part", sid, seq, p, mark)
					}
				}
			}
		}
	}
	st, err := ix.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Chunks != total || st.Vectors != total || st.Dimensions != 3 {
		t.Fatalf("status %+v; want %d chunks, all with 3-dimension vectors", st, total)
	}
}
