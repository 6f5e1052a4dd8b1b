package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
)

// fsckHistory is a session's history the kernel could have written: a
// prompt, a turn with two calls, their results, an answer.
func fsckHistory(t0 time.Time) []kernel.Message {
	return []kernel.Message{
		{Seq: 1, Role: kernel.RoleUser, Content: "list the files", Time: t0},
		{Seq: 2, Role: kernel.RoleAssistant, ToolCalls: []kernel.ToolCall{{ID: "c1", Name: "list_dir", Arguments: `{}`}, {ID: "c2", Name: "read_file", Arguments: `{}`}}, Time: t0},
		{Seq: 3, Role: kernel.RoleTool, ToolCallID: "c1", ToolName: "list_dir", Content: "a b", Time: t0},
		{Seq: 4, Role: kernel.RoleTool, ToolCallID: "c2", ToolName: "read_file", Content: "text", Time: t0},
		{Seq: 5, Role: kernel.RoleAssistant, Content: "Two files.", Time: t0},
	}
}

// fsckStore is a store on a new database and a function running SQL in
// that database as the superuser (to damage it by hand).
func fsckStore(t *testing.T) (*postgres.Store, func(sql string, args ...any)) {
	s, dsn := openStore(t, postgres.Options{})
	u, _ := url.Parse(dsn)
	db := strings.TrimPrefix(u.Path, "/")
	return s, func(sql string, args ...any) {
		t.Helper()
		if err := pgtest.Shared(t).Exec(db, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

func fsckOne(t *testing.T, s *postgres.Store, id string, repair bool) kernel.FsckSession {
	t.Helper()
	rep, err := s.Fsck(context.Background(), []string{id}, repair)
	if err != nil || len(rep.Sessions) != 1 {
		t.Fatalf("Fsck(%s, repair %t) = %+v, %v", id, repair, rep, err)
	}
	return rep.Sessions[0]
}

func problemTexts(f kernel.FsckSession) string {
	var b strings.Builder
	for _, p := range f.Problems {
		b.WriteString(p.Text + "\n")
	}
	return b.String()
}

// TestFsckFindsAndRepairs damages a stored session every way fsck knows
// by writing the tables by hand: a message body that does not decode, a
// message row gone, a row past the last step, a status column that
// disagrees with the metadata, an event numbered past the counter. Fsck
// names each; Load fails before the repair; after it Load reads the
// session whole (placeholders where messages were lost, the lost result
// still answering its call), the next event appends, and a second Fsck
// finds nothing.
func TestFsckFindsAndRepairs(t *testing.T) {
	ctx := context.Background()
	s, exec := fsckStore(t)
	t0 := time.Now().Add(-time.Hour)
	if err := s.Commit(ctx, "s", kernel.Step{Messages: fsckHistory(t0), Meta: kernel.SessionMeta{Status: kernel.StatusIdle, Updated: t0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvents(ctx, "s", 0, []kernel.StoredEvent{{Type: "x", Time: t0, Data: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if f := fsckOne(t, s, "s", false); !f.OK() || f.Messages != 5 {
		t.Fatalf("a healthy session: %+v", f)
	}
	exec(`UPDATE ak_messages SET body = '\x7b6e6f'::bytea WHERE session_id = 's' AND seq = 1`)
	exec(`DELETE FROM ak_messages WHERE session_id = 's' AND seq = 4`)
	exec(`INSERT INTO ak_messages (session_id, seq, body) VALUES ('s', 6, '\x7b7d'::bytea)`)
	exec(`UPDATE ak_sessions SET status = 'running' WHERE id = 's'`)
	exec(`INSERT INTO ak_events (session_id, seq, type, time, data) VALUES ('s', 5, 'x', now(), '\x7b7d'::bytea)`)
	if _, err := s.Load(ctx, "s"); !errors.Is(err, kernel.ErrCorrupt) {
		t.Fatalf("Load of the damaged session = %v, want kernel.ErrCorrupt", err)
	}

	f := fsckOne(t, s, "s", false)
	if f.OK() || !f.Unrepaired() || f.Messages != 4 || len(f.Damaged) != 2 ||
		!strings.Contains(f.Damaged[1], "does not decode") || f.Damaged[4] != "missing from the store" {
		t.Fatalf("fsck of the damaged session: %+v", f)
	}
	got := problemTexts(f)
	for _, want := range []string{"seq 6, outside the session's 1..5", `status column says "running", its metadata "idle"`, "numbered up to 5, past the session's event counter 1"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems do not say %q:\n%s", want, got)
		}
	}
	if len(f.Problems) != 3 {
		t.Errorf("%d problems, want 3 (no pairing problem in a session with damage):\n%s", len(f.Problems), got)
	}

	f = fsckOne(t, s, "s", true)
	if !f.Repaired || f.Unrepaired() {
		t.Fatalf("fsck --repair: %+v", f)
	}
	for _, p := range f.Problems {
		if !p.Repaired {
			t.Errorf("not repaired: %+v", p)
		}
	}
	se, err := s.Load(ctx, "s")
	if err != nil {
		t.Fatalf("Load after the repair: %v", err)
	}
	if len(se.Messages) != 5 || !strings.Contains(se.Messages[0].Content, "message 1 of this session could not be read") {
		t.Fatalf("after the repair: %+v", se.Messages)
	}
	if m := se.Messages[3]; m.Role != kernel.RoleTool || m.ToolCallID != "c2" || !strings.Contains(m.Content, "the result of this call was lost") {
		t.Fatalf("the lost result's placeholder does not answer its call: %+v", m)
	}
	if se.Messages[2].Content != "a b" || se.Messages[4].Content != "Two files." {
		t.Fatalf("the repair changed readable messages: %+v", se.Messages)
	}
	if first, err := s.AppendEvents(ctx, "s", 0, []kernel.StoredEvent{{Type: "y", Time: t0, Data: json.RawMessage(`{}`)}}); err != nil || first != 6 {
		t.Fatalf("append after the repair: first %d, %v; want 6", first, err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].Status != kernel.StatusIdle {
		t.Fatalf("List after the repair: %+v, %v", list, err)
	}
	rep, err := s.Fsck(ctx, nil, false)
	if err != nil || len(rep.Sessions) != 1 || !rep.Sessions[0].OK() {
		t.Fatalf("fsck after the repair: %+v, %v", rep, err)
	}
}

// TestFsckPairing: a history whose values all read but which breaks the
// pairing of calls and results (a result for a call no one made, a call
// of an earlier turn left open, a pending approval for an answered call)
// is reported at the message it is about and left alone by repair (it
// cannot be fixed in place).
func TestFsckPairing(t *testing.T) {
	ctx := context.Background()
	s, _ := fsckStore(t)
	t0 := time.Now()
	h := fsckHistory(t0)
	h[3].ToolCallID = "c9" // answers no call; c2 stays open past message 5
	pending := &kernel.Approval{ID: "a1", Call: kernel.ToolCall{ID: "c1", Name: "list_dir"}, Created: t0}
	if err := s.Commit(ctx, "p", kernel.Step{Messages: h, Pending: pending, Meta: kernel.SessionMeta{Updated: t0}}); err != nil {
		t.Fatal(err)
	}
	for _, repair := range []bool{false, true} {
		f := fsckOne(t, s, "p", repair)
		if !f.Unrepaired() || f.Repaired || len(f.Damaged) != 0 || len(f.Problems) != 3 {
			t.Fatalf("repair %t: %+v", repair, f)
		}
		want := []struct {
			seq  uint64
			text string
		}{{4, `call "c9"`}, {2, "call c2 (read_file) has no result"}, {0, "pending approval is for call \"c1\""}}
		for i, w := range want {
			if p := f.Problems[i]; p.Seq != w.seq || !strings.Contains(p.Text, w.text) || p.Repaired {
				t.Errorf("repair %t: problem %d = %+v, want seq %d and %q", repair, i, p, w.seq, w.text)
			}
		}
	}
}

// TestFsckRepairSparesARunningSession: repair does not write a session
// another owner holds a live lease of; it says so, and the damage stays
// for a repair once the lease is gone.
func TestFsckRepairSparesARunningSession(t *testing.T) {
	ctx := context.Background()
	s, exec := fsckStore(t)
	if err := s.Commit(ctx, "r", kernel.Step{Messages: fsckHistory(time.Now()), Meta: kernel.SessionMeta{Updated: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	l, err := s.AcquireLease(ctx, "r", "replica-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	exec(`DELETE FROM ak_messages WHERE session_id = 'r' AND seq = 5`)
	f := fsckOne(t, s, "r", true)
	if f.Repaired || !f.Unrepaired() || !strings.Contains(problemTexts(f), "not repaired: session r is leased by replica-a") {
		t.Fatalf("repair of a leased session: %+v", f)
	}
	if _, err := s.Load(ctx, "r"); !errors.Is(err, kernel.ErrCorrupt) {
		t.Fatalf("Load after the refused repair = %v, want kernel.ErrCorrupt still", err)
	}
	if err := s.ReleaseLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	if f := fsckOne(t, s, "r", true); !f.Repaired || f.Unrepaired() {
		t.Fatalf("repair once the lease is gone: %+v", f)
	}
	if _, err := s.Load(ctx, "r"); err != nil {
		t.Fatalf("Load after the repair: %v", err)
	}
}
