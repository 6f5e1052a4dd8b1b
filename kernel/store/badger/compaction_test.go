package badger_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/badger"
)

// TestCompactionRecordRoundTrip: a compaction record is stored, exported and
// imported like any message, and still parses.
func TestCompactionRecordRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	msgs := []kernel.Message{
		{Seq: 1, Role: kernel.RoleUser, Content: "hi"},
		{Seq: 2, Role: kernel.RoleAssistant, Content: "hello"},
		{Seq: 3, Role: kernel.RoleCompaction, Content: `{"through":2,"summary":"greeted","tokens_before":10,"tokens_after":5}`},
	}
	if err := s.Commit(ctx, "sess1", kernel.Step{Messages: msgs, Meta: kernel.SessionMeta{ID: "sess1", Status: kernel.StatusIdle}}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.Export(ctx, "sess1", &buf); err != nil {
		t.Fatal(err)
	}
	other, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	id, err := other.Import(ctx, &buf)
	if err != nil {
		t.Fatal(err)
	}
	se, err := other.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kernel.ParseCompaction(&se.Messages[2])
	if err != nil || c.Summary != "greeted" || c.Through != 2 {
		t.Fatalf("record after import: %+v, %v", c, err)
	}
}
