package memory_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

func TestConformance(t *testing.T) {
	kerneltest.TestStore(t, func(t *testing.T) kernel.Store { return memory.New() })
}

func TestEventLogConformance(t *testing.T) {
	kerneltest.TestEventLog(t, func(t *testing.T) kernel.Store { return memory.New() })
}

// TestCommitAppendsInPlace: the steps of a run append to the session's
// history in place. A new session's history has room for a prompt and a
// few turns; append's own growth would reallocate it at the 2nd, 3rd and
// 5th message.
func TestCommitAppendsInPlace(t *testing.T) {
	ctx := context.Background()
	steps := make([]kernel.Step, 8)
	for i := range steps {
		steps[i] = kernel.Step{Messages: []kernel.Message{{Seq: uint64(i + 1), Role: kernel.RoleUser, Content: "x"}}, Meta: kernel.SessionMeta{Status: kernel.StatusIdle}}
	}
	// MemStats counts the whole process's allocations: a goroutine an
	// earlier test left running can allocate meanwhile. The store's own
	// allocations would show in every attempt; the fewest of five is the
	// store's.
	var s *memory.Store
	fewest := uint64(1 << 63)
	for range 5 {
		s = memory.New()
		if err := s.Commit(ctx, "s", steps[0]); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, st := range steps[1:] {
			if err := s.Commit(ctx, "s", st); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		fewest = min(fewest, after.Mallocs-before.Mallocs)
	}
	if fewest != 0 {
		t.Fatalf("7 one-message commits to a new session allocated %d times (the fewest of 5 attempts); the history should have had room", fewest)
	}
	got, err := s.Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 8 || got.Messages[7].Seq != 8 || got.Meta.LastSeq != 8 {
		t.Fatalf("history of %d messages, last seq %d", len(got.Messages), got.Meta.LastSeq)
	}
}

// TestCommitKeepsTheWritersHistory: steps that carry their History (as the
// kernel's do) are kept without a copy: the stored messages are the
// writer's array. The store never writes into that array's spare capacity:
// not when a later step without a History appends (it copies), not when a
// caller appends to what Load returned.
func TestCommitKeepsTheWritersHistory(t *testing.T) {
	s := memory.New()
	ctx := context.Background()
	hist := make([]kernel.Message, 0, 8)
	for i := range 5 {
		hist = append(hist, kernel.Message{Seq: uint64(i + 1), Role: kernel.RoleUser, Content: "m"})
		step := kernel.Step{Messages: hist[i : i+1 : i+1], History: hist[:i+1] /* unclipped: the store clips */, Meta: kernel.SessionMeta{Status: kernel.StatusIdle}}
		if err := s.Commit(ctx, "s", step); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 5 || &got.Messages[0] != &hist[0] {
		t.Fatalf("%d messages, shared %v: want the writer's 5 messages, not a copy", len(got.Messages), len(got.Messages) > 0 && &got.Messages[0] == &hist[0])
	}
	spare := hist[:cap(hist)][5:]
	// A step without a History (another writer) is appended by the store.
	other := kernel.Step{Messages: []kernel.Message{{Seq: 6, Role: kernel.RoleUser, Content: "other"}}, Meta: kernel.SessionMeta{Status: kernel.StatusIdle}}
	if err := s.Commit(ctx, "s", other); err != nil {
		t.Fatal(err)
	}
	_ = append(got.Messages, kernel.Message{Seq: 6, Content: "caller"})
	for i, m := range spare {
		if m.Seq != 0 || m.Content != "" {
			t.Fatalf("the writer's spare capacity [%d] was written: %+v", 5+i, m)
		}
	}
	got, err = s.Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 6 || got.Messages[4].Content != "m" || got.Messages[5].Content != "other" {
		t.Fatalf("history %+v", got.Messages)
	}
}

// TestCommitCopiesAHistoryItCannotVouchFor: a History that does not end
// with the step's own messages (a copy), or that holds more messages than
// the store has before the step, is not kept: the store copies the step's
// messages, and what the writer does to its arrays afterwards changes
// nothing stored.
func TestCommitCopiesAHistoryItCannotVouchFor(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		history func(buf []kernel.Message) []kernel.Message // buf[1:2] is the step's message
	}{
		{"a copy", func(buf []kernel.Message) []kernel.Message { return append([]kernel.Message(nil), buf[1:2]...) }},
		{"one message too many", func(buf []kernel.Message) []kernel.Message { return buf[:2:2] }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := memory.New()
			buf := []kernel.Message{{Seq: 1, Role: kernel.RoleUser, Content: "other"}, {Seq: 1, Role: kernel.RoleUser, Content: "kept"}}
			h := c.history(buf)
			if err := s.Commit(ctx, "s", kernel.Step{Messages: buf[1:2:2], History: h, Meta: kernel.SessionMeta{Status: kernel.StatusIdle}}); err != nil {
				t.Fatal(err)
			}
			for i := range h {
				h[i].Content = "changed"
			}
			buf[1].Content = "changed"
			got, err := s.Load(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Messages) != 1 || got.Messages[0].Content != "kept" {
				t.Fatalf("stored %+v, want the one message as committed", got.Messages)
			}
		})
	}
}
