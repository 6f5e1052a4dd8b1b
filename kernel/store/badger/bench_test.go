package badger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	bdg "github.com/dgraph-io/badger/v4"
)

// benchMessages is a realistic conversation of n messages: a user prompt,
// then rounds of an assistant message with two tool calls and their two
// results (a few hundred bytes each).
func benchMessages(n int) []kernel.Message {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	out := make([]kernel.Message, 0, n)
	body := strings.Repeat("lorem ipsum dolor sit amet ", 12)
	for i := 0; len(out) < n; i++ {
		seq := uint64(len(out) + 1)
		at := t0.Add(time.Duration(seq) * time.Second)
		switch {
		case len(out) == 0:
			out = append(out, kernel.Message{Seq: seq, Role: kernel.RoleUser, Content: "summarise the repository", Time: at})
		case i%3 == 1:
			out = append(out, kernel.Message{Seq: seq, Role: kernel.RoleAssistant, Content: "Reading two files.", Time: at,
				ToolCalls: []kernel.ToolCall{
					{ID: fmt.Sprintf("c%d-1", i), Name: "read_file", Arguments: `{"path":"kernel/loop.go"}`},
					{ID: fmt.Sprintf("c%d-2", i), Name: "read_file", Arguments: `{"path":"kernel/session.go"}`},
				}})
		default:
			out = append(out, kernel.Message{Seq: seq, Role: kernel.RoleTool, ToolCallID: fmt.Sprintf("c%d-1", i-1), ToolName: "read_file", Content: body, Time: at})
		}
	}
	return out
}

func renumber(msgs []kernel.Message, first uint64) []kernel.Message {
	out := make([]kernel.Message, len(msgs))
	for i, m := range msgs {
		m.Seq = first + uint64(i)
		out[i] = m
	}
	return out
}

// BenchmarkCommitStep is one loop step (an assistant message plus the
// session's metadata) made durable: one synced write.
func BenchmarkCommitStep(b *testing.B) {
	s := openTest(b, Options{})
	ctx := context.Background()
	msg := benchMessages(2)[1]
	meta := kernel.SessionMeta{Model: "m", Status: kernel.StatusRunning, Title: "bench"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		msg.Seq = uint64(i + 1)
		if err := s.Commit(ctx, "bench", kernel.Step{Messages: []kernel.Message{msg}, Meta: meta}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCommitRound8 is the results of a round of 8 tool calls (1 KiB
// each) committed as one step: still one synced write.
func BenchmarkCommitRound8(b *testing.B) {
	s := openTest(b, Options{})
	ctx := context.Background()
	round := make([]kernel.Message, 8)
	for i := range round {
		round[i] = kernel.Message{Role: kernel.RoleTool, ToolCallID: fmt.Sprintf("c%d", i), ToolName: "read_file",
			Content: strings.Repeat("x", 1024), Time: time.Now()}
	}
	meta := kernel.SessionMeta{Model: "m", Status: kernel.StatusRunning}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Commit(ctx, "bench", kernel.Step{Messages: renumber(round, uint64(i*8+1)), Meta: meta}); err != nil {
			b.Fatal(err)
		}
	}
}

// fill stores a session of n messages in dir, in steps of up to 64
// messages, and closes the store (so a reopen reads it from tables, as a
// new CLI process does).
func fill(b testing.TB, dir, id string, n int) {
	s, err := Open(dir, Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	msgs := benchMessages(n)
	for i := 0; i < n; i += 64 {
		j := min(i+64, n)
		if err := s.Commit(context.Background(), id, kernel.Step{Messages: msgs[i:j], Meta: kernel.SessionMeta{Title: id}}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLoad10k resumes a session of 10,000 messages.
func BenchmarkLoad10k(b *testing.B) {
	dir := b.TempDir()
	fill(b, dir, "big", 10_000)
	s := openAt(b, dir, Options{})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		se, err := s.Load(ctx, "big")
		if err != nil {
			b.Fatal(err)
		}
		if len(se.Messages) != 10_000 {
			b.Fatalf("%d messages", len(se.Messages))
		}
	}
}

// BenchmarkOpen opens (and closes, untimed) a store holding a 10,000
// message session.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	fill(b, dir, "big", 10_000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := Open(dir, Options{Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkList lists 1,000 sessions of 20 messages.
func BenchmarkList(b *testing.B) {
	s := openTest(b, Options{})
	ctx := context.Background()
	msgs := benchMessages(20)
	for i := range 1000 {
		if err := s.Commit(ctx, fmt.Sprintf("s%04d", i), kernel.Step{Messages: msgs, Meta: kernel.SessionMeta{Updated: time.Now()}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := s.List(ctx)
		if err != nil || len(l) != 1000 {
			b.Fatal(len(l), err)
		}
	}
}

// BenchmarkOpenSnapshot opens a store read-only while this process holds
// it for writing, without the writer's socket (as `kernel sessions ls`
// next to a writer that does not answer): each Open copies the store.
func BenchmarkOpenSnapshot(b *testing.B) {
	noSocket = true
	defer func() { noSocket = false }()
	dir := b.TempDir()
	fill(b, dir, "big", 10_000)
	w := openAt(b, dir, Options{})
	commitN(b, w, "live", 100, kernel.SessionMeta{})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := Open(dir, Options{ReadOnly: true, Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if s.snapshot == "" {
			b.Fatal("not a snapshot")
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkFsyncFloor is the disk's floor for one durable step: append
// 512 bytes to a file and fdatasync it. Compare BenchmarkCommitStep.
func BenchmarkFsyncFloor(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "floor"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 512)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCommitParallel commits steps of 16 sessions at once (a
// server): how far Badger's write path shares syncs between them.
func BenchmarkCommitParallel(b *testing.B) {
	s := openTest(b, Options{})
	ctx := context.Background()
	msg := benchMessages(2)[1]
	var next atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := fmt.Sprintf("p%d", next.Add(1))
		m := msg
		for seq := uint64(1); pb.Next(); seq++ {
			m.Seq = seq
			if err := s.Commit(ctx, id, kernel.Step{Messages: []kernel.Message{m}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkMetaRead is what a commit reads of the stored metadata before
// it writes (stage: the last seq) against the whole metadata a Load
// decodes, for a session as `kernel serve` stores it (owner label,
// recorded context).
func BenchmarkMetaRead(b *testing.B) {
	s := openTest(b, Options{})
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	meta := kernel.SessionMeta{Model: "scripted", Status: kernel.StatusIdle, Title: "read", Created: t0, Updated: t0.Add(time.Second),
		Runs: 1, Turns: 2, Usage: kernel.Usage{InputTokens: 120, OutputTokens: 30},
		Labels: map[string]string{"owner": "key_3f9a2c"},
		Context: &kernel.SessionContext{Workspace: "/srv/agent/workspace", WorkspaceID: &kernel.FileID{Dev: 2049, Ino: 131073},
			Config: []kernel.RecordedFile{{Path: "/etc/agentkernel/kernel.yaml", SHA256: strings.Repeat("ab", 32)}},
			Policy: &kernel.RecordedFile{Path: "/etc/agentkernel/policy.yaml", SHA256: strings.Repeat("cd", 32)}, PolicyRevision: "r7",
			Provider: "scripted", Model: "scripted", Store: "badger"}}
	if err := s.Commit(ctx, "bench", kernel.Step{Messages: benchMessages(1), Meta: meta}); err != nil {
		b.Fatal(err)
	}
	b.Run("last-seq", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.db.View(func(txn *bdg.Txn) error {
				last, err := s.readLastSeq(txn, "bench")
				if err == nil && last != 1 {
					b.Fatalf("last seq %d, want 1", last)
				}
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.db.View(func(txn *bdg.Txn) error {
				m, err := s.readMeta(txn, "bench")
				if err == nil && m.LastSeq != 1 {
					b.Fatalf("last seq %d, want 1", m.LastSeq)
				}
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A session's whole Load against LoadHead (kernel serve's ownership
	// check), on the 1-message session and on one of 500 messages.
	if err := s.Commit(ctx, "long", kernel.Step{Messages: benchMessages(500), Meta: meta}); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		id string
		n  int
	}{{"bench", 1}, {"long", 500}} {
		b.Run(fmt.Sprintf("load-%d", c.n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if sess, err := s.Load(ctx, c.id); err != nil || len(sess.Messages) != c.n {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("head-%d", c.n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if sess, err := s.LoadHead(ctx, c.id); err != nil || sess.Meta.LastSeq != uint64(c.n) {
					b.Fatal(err)
				}
			}
		})
	}
}
