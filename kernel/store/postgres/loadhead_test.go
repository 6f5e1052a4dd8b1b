package postgres_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
)

// TestLoadHead: LoadHead is Load without the messages. After a message
// row is damaged, Load fails (kernel.ErrCorrupt) but LoadHead answers as
// before: it reads no message. An unknown or invalid id, and a session
// the TTL sweep removed, give ErrSessionNotFound; a metadata value that
// does not decode gives a *kernel.CorruptError naming the meta.
func TestLoadHead(t *testing.T) {
	ctx := context.Background()
	s, dsn := openStore(t, postgres.Options{})
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	exec := func(sql string) {
		t.Helper()
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}

	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	meta := kernel.SessionMeta{Status: kernel.StatusIdle, Title: "head", Created: t0, Updated: t0, Labels: map[string]string{"owner": "alice"}}
	msgs := []kernel.Message{
		{Seq: 1, Role: kernel.RoleUser, Content: "hello", Time: t0},
		{Seq: 2, Role: kernel.RoleAssistant, Content: "", Time: t0, ToolCalls: []kernel.ToolCall{{ID: "c1", Name: "write_file", Arguments: `{"path":"x"}`}}},
	}
	if err := s.Commit(ctx, "s", kernel.Step{Messages: msgs, Meta: meta}); err != nil {
		t.Fatal(err)
	}
	pend := &kernel.Approval{ID: "ap1", SessionID: "s", Call: msgs[1].ToolCalls[0], Args: []byte(`{"path":"x"}`), Created: t0, Expires: t0.Add(2 * time.Hour)}
	meta.Status = kernel.StatusAwaitingApproval
	if err := s.Commit(ctx, "s", kernel.Step{Meta: meta, Pending: pend}); err != nil {
		t.Fatal(err)
	}
	head := kerneltest.CheckHead(t, s, "s")
	if head.Pending == nil {
		t.Fatal("LoadHead lost the pending approval")
	}
	if head.Meta.LastSeq != 2 || head.Meta.ID != "s" {
		t.Fatalf("LoadHead's meta: id %q, last seq %d; want s, 2", head.Meta.ID, head.Meta.LastSeq)
	}

	exec(`UPDATE ak_messages SET body = '\x7b6e6f'::bytea WHERE session_id = 's' AND seq = 2`)
	if _, err := s.Load(ctx, "s"); !errors.Is(err, kernel.ErrCorrupt) {
		t.Fatalf("Load after a damaged message = %v, want kernel.ErrCorrupt", err)
	}
	if h, err := s.LoadHead(ctx, "s"); err != nil || h.Messages != nil || !reflect.DeepEqual(h.Meta, head.Meta) || !reflect.DeepEqual(h.Pending, head.Pending) {
		t.Fatalf("LoadHead after a damaged message = %+v, %v; want the head as before (no message read)", h, err)
	}

	for _, id := range []string{"nobody", "../s", ""} {
		if _, err := s.LoadHead(ctx, id); !errors.Is(err, kernel.ErrSessionNotFound) {
			t.Errorf("LoadHead(%q) = %v, want ErrSessionNotFound", id, err)
		}
	}

	if err := s.Commit(ctx, "victim", kernel.Step{Meta: kernel.SessionMeta{Status: kernel.StatusIdle, Updated: t0}}); err != nil {
		t.Fatal(err)
	}
	exec(`UPDATE ak_sessions SET meta = '[1]'::jsonb WHERE id = 'victim'`)
	var ce *kernel.CorruptError
	if _, err := s.LoadHead(ctx, "victim"); !errors.As(err, &ce) || ce.Session != "victim" || ce.Part != "meta" {
		t.Errorf("LoadHead with a damaged meta = %v, want a *kernel.CorruptError for victim's meta", err)
	}

	if _, err := s.GC(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadHead(ctx, "s"); !errors.Is(err, kernel.ErrSessionNotFound) {
		t.Errorf("LoadHead of a session the TTL sweep removed = %v, want ErrSessionNotFound", err)
	}
}
