package badger

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
)

// TestLoadHead: LoadHead is Load without the messages. A damaged message,
// which Load reports with a placeholder and a LabelDamaged label, leaves
// LoadHead's answer as it was: it reads no message (else the label would
// be there). Unknown, invalid, expired and damaged-meta sessions fail as
// Load fails.
func TestLoadHead(t *testing.T) {
	ctx := context.Background()
	now := t0
	s := openTest(t, Options{TTL: time.Hour, GCInterval: -1, Now: func() time.Time { return now }})
	commitN(t, s, "s", 3, kernel.SessionMeta{Updated: t0, Title: "head", Labels: map[string]string{"owner": "alice"}})
	pend := &kernel.Approval{ID: "ap1", SessionID: "s", Call: kernel.ToolCall{ID: "c1", Name: "write_file", Arguments: `{"path":"x"}`}, Args: []byte(`{"path":"x"}`)}
	if err := s.Commit(ctx, "s", kernel.Step{Meta: kernel.SessionMeta{Updated: t0, Title: "head", Labels: map[string]string{"owner": "alice"}, Status: kernel.StatusAwaitingApproval}, Pending: pend}); err != nil {
		t.Fatal(err)
	}
	head := kerneltest.CheckHead(t, s, "s")
	if head.Pending == nil {
		t.Fatal("LoadHead lost the pending approval")
	}

	v := encodeMessage(nil, &kernel.Message{Role: kernel.RoleUser, Content: "x"})
	v[3] ^= 1
	put(t, s, msgKey("s", 2), v)
	if se, err := s.Load(ctx, "s"); err != nil || se.Meta.Labels[LabelDamaged] == "" {
		t.Fatalf("Load after a damaged message = %v, labels %v; want the damage labelled", err, se.Meta.Labels)
	}
	if h, err := s.LoadHead(ctx, "s"); err != nil || !reflect.DeepEqual(h.Meta, head.Meta) || h.Messages != nil {
		t.Fatalf("LoadHead after a damaged message = %+v, %v; want the metadata as before (no message read)", h, err)
	}

	for _, id := range []string{"nobody", "../s"} {
		if _, err := s.LoadHead(ctx, id); !errors.Is(err, kernel.ErrSessionNotFound) {
			t.Errorf("LoadHead(%q) = %v, want ErrSessionNotFound", id, err)
		}
	}
	commitN(t, s, "victim", 1, kernel.SessionMeta{Updated: t0})
	put(t, s, metaKey("victim"), []byte("{garbage"))
	var ce *kernel.CorruptError
	if _, err := s.LoadHead(ctx, "victim"); !errors.As(err, &ce) || ce.Session != "victim" || ce.Part != "meta" {
		t.Errorf("LoadHead with a damaged meta = %v, want a *kernel.CorruptError for victim's meta", err)
	}
	now = t0.Add(2 * time.Hour)
	if _, err := s.LoadHead(ctx, "s"); !errors.Is(err, kernel.ErrSessionNotFound) {
		t.Errorf("LoadHead of an expired session = %v, want ErrSessionNotFound", err)
	}
}
