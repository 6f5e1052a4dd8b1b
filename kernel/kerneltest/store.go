package kerneltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// TestStore runs the Store conformance suite. open must return a new, empty
// store for each call.
func TestStore(t *testing.T, open func(t *testing.T) kernel.Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

	t.Run("LoadUnknown", func(t *testing.T) {
		s := open(t)
		if _, err := s.Load(ctx, "nope"); !errors.Is(err, kernel.ErrSessionNotFound) {
			t.Fatalf("Load(unknown) = %v, want ErrSessionNotFound", err)
		}
	})

	t.Run("RoundTrip", func(t *testing.T) {
		s := open(t)
		msgs := sampleMessages(t0)
		meta := kernel.SessionMeta{ID: "s1", Title: "hello", Model: "m", Status: kernel.StatusRunning,
			Created: t0, Updated: t0, Runs: 1, Turns: 1, Usage: kernel.Usage{InputTokens: 10, OutputTokens: 5},
			CostUSD: 0.25, Labels: map[string]string{"team": "infra"}}
		mustCommit(t, s, "s1", kernel.Step{Messages: msgs[:1], Meta: meta})
		mustCommit(t, s, "s1", kernel.Step{Messages: msgs[1:2], Meta: meta})
		mustCommit(t, s, "s1", kernel.Step{Messages: msgs[2:], Meta: meta})
		got, err := s.Load(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(normalize(got.Messages), normalize(msgs)) {
			t.Fatalf("messages differ:\n got %+v\nwant %+v", got.Messages, msgs)
		}
		meta.LastSeq = uint64(len(msgs))
		if !reflect.DeepEqual(normalizeMeta(got.Meta), normalizeMeta(meta)) {
			t.Fatalf("meta differs:\n got %+v\nwant %+v", got.Meta, meta)
		}
		if got.Pending != nil {
			t.Fatalf("pending = %+v, want none", got.Pending)
		}
	})

	t.Run("SeqConflict", func(t *testing.T) {
		s := open(t)
		msgs := sampleMessages(t0)
		meta := kernel.SessionMeta{ID: "s1", Created: t0, Updated: t0}
		mustCommit(t, s, "s1", kernel.Step{Messages: msgs[:1], Meta: meta})
		for name, bad := range map[string][]kernel.Message{
			"gap":             {withSeq(msgs[1], 3)},
			"replay":          {withSeq(msgs[1], 1)},
			"not-consecutive": {withSeq(msgs[1], 2), withSeq(msgs[2], 4)},
		} {
			err := s.Commit(ctx, "s1", kernel.Step{Messages: bad, Meta: meta})
			if !errors.Is(err, kernel.ErrSeqConflict) {
				t.Fatalf("%s: Commit = %v, want ErrSeqConflict", name, err)
			}
		}
		got, err := s.Load(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Messages) != 1 || got.Meta.LastSeq != 1 {
			t.Fatalf("a rejected step wrote something: %d messages, last seq %d", len(got.Messages), got.Meta.LastSeq)
		}
		if err := s.Commit(ctx, "new", kernel.Step{Messages: []kernel.Message{withSeq(msgs[0], 2)}}); !errors.Is(err, kernel.ErrSeqConflict) {
			t.Fatalf("first message of a new session with seq 2: %v, want ErrSeqConflict", err)
		}
	})

	t.Run("MetaOnlyStep", func(t *testing.T) {
		s := open(t)
		msgs := sampleMessages(t0)
		mustCommit(t, s, "s1", kernel.Step{Messages: msgs[:2], Meta: kernel.SessionMeta{Status: kernel.StatusRunning, Updated: t0}})
		mustCommit(t, s, "s1", kernel.Step{Meta: kernel.SessionMeta{Status: kernel.StatusIdle, Updated: t0.Add(time.Second), Turns: 3}})
		got, err := s.Load(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Meta.Status != kernel.StatusIdle || got.Meta.Turns != 3 || got.Meta.LastSeq != 2 || len(got.Messages) != 2 {
			t.Fatalf("after a meta-only step: %+v with %d messages", got.Meta, len(got.Messages))
		}
		if got.Meta.ID != "s1" {
			t.Fatalf("meta id = %q, want s1", got.Meta.ID)
		}
	})

	t.Run("PendingApproval", func(t *testing.T) {
		s := open(t)
		msgs := sampleMessages(t0)
		a := &kernel.Approval{ID: "a1", SessionID: "s1", Call: kernel.ToolCall{ID: "c9", Name: "write_file", Arguments: `{"path":"x"}`},
			Args: []byte(`{"path":"x"}`), RuleID: "writes-need-approval", Message: "writes need approval",
			DecisionID: "d1", Created: t0, Expires: t0.Add(time.Hour)}
		mustCommit(t, s, "s1", kernel.Step{Messages: msgs[:1], Pending: a, Meta: kernel.SessionMeta{Status: kernel.StatusAwaitingApproval}})
		got, err := s.Load(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Pending == nil || !reflect.DeepEqual(normalizeApproval(*got.Pending), normalizeApproval(*a)) {
			t.Fatalf("pending = %+v, want %+v", got.Pending, a)
		}
		mustCommit(t, s, "s1", kernel.Step{Messages: []kernel.Message{withSeq(msgs[1], 2)}, ClearPending: true})
		got, err = s.Load(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Pending != nil {
			t.Fatalf("pending after ClearPending = %+v", got.Pending)
		}
	})

	t.Run("List", func(t *testing.T) {
		s := open(t)
		for i, id := range []string{"a", "b", "c"} {
			m := kernel.Message{Seq: 1, Role: kernel.RoleUser, Content: id, Time: t0}
			mustCommit(t, s, id, kernel.Step{Messages: []kernel.Message{m}, Meta: kernel.SessionMeta{Title: id, Updated: t0.Add(time.Duration(i) * time.Minute)}})
		}
		got, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range got {
			ids = append(ids, m.ID)
		}
		if !reflect.DeepEqual(ids, []string{"c", "b", "a"}) {
			t.Fatalf("List order = %v, want [c b a] (most recently updated first)", ids)
		}
	})

	t.Run("LoadedSliceIsACopy", func(t *testing.T) {
		s := open(t)
		msgs := sampleMessages(t0)
		mustCommit(t, s, "s1", kernel.Step{Messages: msgs[:2]})
		got, err := s.Load(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		_ = append(got.Messages, kernel.Message{Seq: 99, Content: "scribble"})
		mustCommit(t, s, "s1", kernel.Step{Messages: []kernel.Message{withSeq(msgs[2], 3)}})
		again, err := s.Load(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if again.Messages[2].Content != msgs[2].Content {
			t.Fatalf("appending to a loaded slice changed the store: %+v", again.Messages[2])
		}
	})

	t.Run("ConcurrentSessions", func(t *testing.T) {
		s := open(t)
		const writers, steps = 8, 40
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("w%d", w)
				for i := 1; i <= steps; i++ {
					m := kernel.Message{Seq: uint64(i), Role: kernel.RoleUser, Content: fmt.Sprintf("%s-%d", id, i), Time: t0}
					if err := s.Commit(ctx, id, kernel.Step{Messages: []kernel.Message{m}, Meta: kernel.SessionMeta{Turns: i}}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for w := range writers {
			id := fmt.Sprintf("w%d", w)
			got, err := s.Load(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Messages) != steps || got.Meta.Turns != steps {
				t.Fatalf("%s: %d messages, %d turns; want %d", id, len(got.Messages), got.Meta.Turns, steps)
			}
			for i, m := range got.Messages {
				if want := fmt.Sprintf("%s-%d", id, i+1); m.Content != want || m.Seq != uint64(i+1) {
					t.Fatalf("%s message %d = %q seq %d, want %q", id, i, m.Content, m.Seq, want)
				}
			}
		}
	})

	t.Run("RacingWritersOneSession", func(t *testing.T) {
		s := open(t)
		const racers = 6
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for r := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := kernel.Message{Seq: 1, Role: kernel.RoleUser, Content: fmt.Sprint(r), Time: t0}
				err := s.Commit(ctx, "race", kernel.Step{Messages: []kernel.Message{m}})
				switch {
				case err == nil:
					mu.Lock()
					wins++
					mu.Unlock()
				case !errors.Is(err, kernel.ErrSeqConflict):
					t.Errorf("losing writer got %v, want ErrSeqConflict", err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("%d writers stored seq 1, want exactly 1", wins)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		s := open(t)
		d, ok := s.(kernel.SessionDeleter)
		if !ok {
			t.Skip("store does not implement kernel.SessionDeleter")
		}
		mustCommit(t, s, "gone", kernel.Step{Messages: sampleMessages(t0)[:1]})
		mustCommit(t, s, "kept", kernel.Step{Messages: sampleMessages(t0)[:1]})
		if err := d.Delete(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(ctx, "gone"); !errors.Is(err, kernel.ErrSessionNotFound) {
			t.Fatalf("Load after Delete = %v, want ErrSessionNotFound", err)
		}
		if _, err := s.Load(ctx, "kept"); err != nil {
			t.Fatalf("Delete removed another session: %v", err)
		}
		if err := d.Delete(ctx, "gone"); !errors.Is(err, kernel.ErrSessionNotFound) {
			t.Fatalf("second Delete = %v, want ErrSessionNotFound", err)
		}
	})

	testOptional(t, open, t0)
}

// testOptional checks the optional capabilities (kernel/store.go) the
// store has; a capability it lacks is not tested.
func testOptional(t *testing.T, open func(t *testing.T) kernel.Store, t0 time.Time) {
	ctx := context.Background()
	probe := open(t)
	if _, ok := probe.(kernel.SessionHeadLoader); ok {
		t.Run("LoadHead", func(t *testing.T) {
			s := open(t)
			h := s.(kernel.SessionHeadLoader)
			msgs := sampleMessages(t0)
			a := &kernel.Approval{ID: "a1", SessionID: "s1", Call: kernel.ToolCall{ID: "c9", Name: "write_file", Arguments: `{"path":"x"}`},
				Args: []byte(`{"path":"x"}`), Created: t0, Expires: t0.Add(time.Hour)}
			mustCommit(t, s, "s1", kernel.Step{Messages: msgs[:2], Pending: a, Meta: kernel.SessionMeta{Status: kernel.StatusAwaitingApproval, Updated: t0,
				Labels: map[string]string{"owner": "alice"}}})
			if CheckHead(t, s, "s1").Pending == nil {
				t.Fatal("LoadHead lost the pending approval")
			}
			if _, err := h.LoadHead(ctx, "nobody"); !errors.Is(err, kernel.ErrSessionNotFound) {
				t.Fatalf("LoadHead(unknown) = %v, want ErrSessionNotFound", err)
			}
		})
	}
	if _, ok := probe.(kernel.SessionExporter); ok {
		t.Run("ExportImport", func(t *testing.T) {
			src := open(t)
			meta := kernel.SessionMeta{ID: "s1", Title: "hello", Model: "m", Status: kernel.StatusAwaitingApproval, Created: t0, Updated: t0,
				Runs: 1, Turns: 2, Labels: map[string]string{"team": "infra"}}
			msgs := sampleMessages(t0)[:2] // the assistant's calls wait for results
			pending := &kernel.Approval{ID: "a1", SessionID: "s1", Call: msgs[1].ToolCalls[1], Args: []byte(`{}`), Created: t0, Expires: t0.Add(time.Hour)}
			mustCommit(t, src, "s1", kernel.Step{Messages: msgs, Meta: meta, Pending: pending})
			var buf bytes.Buffer
			if err := src.(kernel.SessionExporter).Export(ctx, "s1", &buf); err != nil {
				t.Fatal(err)
			}
			dst := open(t)
			im, ok := dst.(kernel.SessionImporter)
			if !ok {
				t.Fatal("the store exports sessions but cannot import them (kernel.SessionImporter)")
			}
			if _, err := im.Import(ctx, strings.NewReader("{not an export\n")); err == nil {
				t.Fatal("Import accepted a file that is not an export")
			}
			id, err := im.Import(ctx, bytes.NewReader(buf.Bytes()))
			if err != nil || id != "s1" {
				t.Fatalf("Import = %q, %v", id, err)
			}
			want, err := src.Load(ctx, "s1")
			if err != nil {
				t.Fatal(err)
			}
			got, err := dst.Load(ctx, "s1")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(normalize(got.Messages), normalize(want.Messages)) || !reflect.DeepEqual(normalizeMeta(got.Meta), normalizeMeta(want.Meta)) {
				t.Fatalf("imported session differs:\n got %+v\nwant %+v", got, want)
			}
			if got.Pending == nil || !reflect.DeepEqual(normalizeApproval(*got.Pending), normalizeApproval(*want.Pending)) {
				t.Fatalf("imported pending approval %+v, want %+v", got.Pending, want.Pending)
			}
			// The sentinel is the kernel's, whatever the store: errors.Is
			// works across stores.
			if _, err := im.Import(ctx, bytes.NewReader(buf.Bytes())); !errors.Is(err, kernel.ErrSessionExists) {
				t.Fatalf("a second Import of the same session = %v, want kernel.ErrSessionExists", err)
			}
		})
	}
	if _, ok := probe.(kernel.SessionCollector); ok {
		t.Run("Collect", func(t *testing.T) {
			s := open(t)
			now := time.Now()
			mustCommit(t, s, "old", kernel.Step{Messages: sampleMessages(t0)[:1], Meta: kernel.SessionMeta{ID: "old", Created: now.Add(-72 * time.Hour), Updated: now.Add(-48 * time.Hour)}})
			mustCommit(t, s, "new", kernel.Step{Messages: sampleMessages(t0)[:1], Meta: kernel.SessionMeta{ID: "new", Created: now, Updated: now}})
			removed, err := s.(kernel.SessionCollector).GC(ctx, 24*time.Hour)
			if err != nil || !reflect.DeepEqual(removed, []string{"old"}) {
				t.Fatalf("GC(24h) = %v, %v; want [old]", removed, err)
			}
			if _, err := s.Load(ctx, "old"); !errors.Is(err, kernel.ErrSessionNotFound) {
				t.Fatalf("Load after GC = %v, want ErrSessionNotFound", err)
			}
			if _, err := s.Load(ctx, "new"); err != nil {
				t.Fatalf("GC removed a recent session: %v", err)
			}
		})
	}
	if _, ok := probe.(kernel.StoreChecker); ok {
		t.Run("Check", func(t *testing.T) {
			s := open(t)
			mustCommit(t, s, "s1", kernel.Step{Messages: sampleMessages(t0)})
			mustCommit(t, s, "s2", kernel.Step{Messages: sampleMessages(t0)[:1]})
			rep, err := s.(kernel.StoreChecker).Fsck(ctx, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Sessions) != 2 || rep.Damaged() != 0 {
				t.Fatalf("Fsck of a healthy store: %+v", rep)
			}
			for _, f := range rep.Sessions {
				if want := map[string]int{"s1": len(sampleMessages(t0)), "s2": 1}[f.ID]; f.Messages != want || !f.OK() {
					t.Errorf("Fsck session %+v, want %d messages, no damage", f, want)
				}
			}
		})
	}
}

func mustCommit(t *testing.T, s kernel.Store, id string, step kernel.Step) {
	t.Helper()
	if err := s.Commit(context.Background(), id, step); err != nil {
		t.Fatalf("Commit(%s): %v", id, err)
	}
}

func withSeq(m kernel.Message, seq uint64) kernel.Message {
	m.Seq = seq
	return m
}

// sampleMessages is a short conversation that uses every Message field.
func sampleMessages(t0 time.Time) []kernel.Message {
	return []kernel.Message{
		{Seq: 1, Role: kernel.RoleUser, Content: "list the files", Time: t0},
		{Seq: 2, Role: kernel.RoleAssistant, Content: "Looking.", Reasoning: "the user wants a listing",
			ToolCalls: []kernel.ToolCall{{ID: "c1", Name: "list_dir", Arguments: `{"path":"."}`}, {ID: "c2", Name: "git.git_status", Arguments: `{}`}},
			Time:      t0.Add(time.Second), Model: "local", ReasoningField: "reasoning_content",
			Protocol: &kernel.ProtocolNote{Raw: "Looking.\n<tool_call>\n{\"name\": \"list_dir\", \"arguments\": {\"path\":\".\"}}\n</tool_call>"}},
		{Seq: 3, Role: kernel.RoleTool, ToolCallID: "c1", ToolName: "list_dir", Content: "a.go\nb.go\n", Time: t0.Add(2 * time.Second),
			Approval: &kernel.ApprovalRecord{ID: "a1", Approved: true, By: "alice", Note: "fine by me"}},
		{Seq: 4, Role: kernel.RoleTool, ToolCallID: "c2", ToolName: "git.git_status", Content: "error: not a repository", IsError: true, Time: t0.Add(2 * time.Second)},
		{Seq: 5, Role: kernel.RoleAssistant, Content: "Two Go files: a.go and b.go ✓", Time: t0.Add(3 * time.Second),
			Hooks: &kernel.HookRecord{Notes: []kernel.HookNote{{Hook: "pii", Point: kernel.PointAfterModel, What: kernel.NoteText},
				{Hook: "memory", Point: kernel.PointBeforeModel, What: kernel.NoteContext}},
				Edits: []kernel.Edit{{Hook: "pii", Seq: 1, Content: "list the [REDACTED] files"}}}},
		{Seq: 6, Role: kernel.RoleUser, Content: "Tool protocol error: ...", Protocol: &kernel.ProtocolNote{Correction: "prose_after_call"}, Time: t0.Add(4 * time.Second)},
		{Seq: 7, Role: kernel.RoleAssistant, Failed: "cancelled before the model answered", Model: "local", Time: t0.Add(5 * time.Second),
			Hooks: &kernel.HookRecord{Notes: []kernel.HookNote{{Hook: "guard", Point: kernel.PointBeforeModel, What: kernel.NoteBlocked, Reason: "injection"}}}},
	}
}

// normalize makes times comparable with reflect.DeepEqual (stores may drop
// the monotonic reading and the location).
func normalize(msgs []kernel.Message) []kernel.Message {
	out := make([]kernel.Message, len(msgs))
	for i, m := range msgs {
		m.Time = m.Time.UTC().Round(0)
		out[i] = m
	}
	return out
}

func normalizeMeta(m kernel.SessionMeta) kernel.SessionMeta {
	m.Created, m.Updated = m.Created.UTC().Round(0), m.Updated.UTC().Round(0)
	return m
}

// CheckHead loads session id with Load and with LoadHead
// (kernel.SessionHeadLoader, which s must be) and fails t unless the head
// is the whole session without its messages; it returns the head.
func CheckHead(t testing.TB, s kernel.Store, id string) *kernel.Session {
	t.Helper()
	ctx := context.Background()
	whole, err := s.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	head, err := s.(kernel.SessionHeadLoader).LoadHead(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	same := (head.Pending == nil) == (whole.Pending == nil)
	if same && head.Pending != nil {
		same = reflect.DeepEqual(normalizeApproval(*head.Pending), normalizeApproval(*whole.Pending))
	}
	if head.Messages != nil || !reflect.DeepEqual(head.Meta, whole.Meta) || !same {
		t.Fatalf("LoadHead = %+v\nLoad     = %+v (want it without its messages)", head, whole)
	}
	return head
}

func normalizeApproval(a kernel.Approval) kernel.Approval {
	a.Created, a.Expires = a.Created.UTC().Round(0), a.Expires.UTC().Round(0)
	return a
}
