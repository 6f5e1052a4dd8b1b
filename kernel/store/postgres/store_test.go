package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/replica"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if durable != nil {
		durable.Stop()
	}
	os.Exit(code)
}

// openStore opens a store on a new, migrated database, closed when t
// ends.
func openStore(t testing.TB, opts postgres.Options) (*postgres.Store, string) {
	t.Helper()
	dsn := pgtest.Shared(t).Migrated(t)
	s, err := postgres.Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}

func open(t *testing.T) kernel.Store {
	s, _ := openStore(t, postgres.Options{})
	return s
}

func TestConformance(t *testing.T)         { kerneltest.TestStore(t, open) }
func TestEventLogConformance(t *testing.T) { kerneltest.TestEventLog(t, open) }
func TestLeaserConformance(t *testing.T)   { kerneltest.TestLeaser(t, open) }
func TestStepEventCommitterConformance(t *testing.T) {
	kerneltest.TestStepEventCommitter(t, open)
}

// TestCrashRepair is the crash-repair scenario on PostgreSQL: a session a
// crash left with calls and no results is answered as interrupted, made
// durable, and the model goes on.
func TestCrashRepair(t *testing.T) {
	reg := kernel.NewRegistry()
	if err := reg.Register(kerneltest.EchoTool("echo"), kerneltest.NewRecorder("write_note", kernel.TierSideEffecting, "noted")); err != nil {
		t.Fatal(err)
	}
	s := open(t)
	got := kerneltest.RepairResultsIn(t, s, reg, time.Now().Add(-time.Minute),
		kernel.ToolCall{ID: "c1", Name: "echo", Arguments: `{"text":"a"}`},
		kernel.ToolCall{ID: "c2", Name: "write_note", Arguments: `{"text":"b"}`})
	if got["c1"] != kernel.Interrupted || got["c2"] != kernel.Interrupted {
		t.Fatalf("repair results = %v, want both %q", got, kernel.Interrupted)
	}
	se, err := s.Load(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if last := se.Messages[len(se.Messages)-1]; last.Role != kernel.RoleAssistant || last.Content != "ok" {
		t.Fatalf("after the repair the run did not go on: last message %+v", last)
	}
}

// TestContentRoundTrips: content no PostgreSQL text column could hold (NUL
// bytes, every Unicode plane) and metadata with odd labels come back
// exactly.
func TestContentRoundTrips(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	weird := "nul:\x00 tab:\t emoji:🦀 rtl:\u202e quote:\" backslash:\\ " + strings.Repeat("x", 70000)
	meta := kernel.SessionMeta{Title: "t\x00itle", Labels: map[string]string{"k\x00": "v\u2028"}, Status: kernel.StatusIdle}
	msgs := []kernel.Message{{Seq: 1, Role: kernel.RoleUser, Content: weird, Time: time.Now()},
		{Seq: 2, Role: kernel.RoleAssistant, Content: "a", Model: "m", Failed: "why", ReasoningField: "reasoning", Time: time.Now()}}
	if err := s.Commit(ctx, "w", kernel.Step{Messages: msgs, Meta: meta}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if got.Messages[0].Content != weird || got.Meta.Title != meta.Title || got.Meta.Labels["k\x00"] != "v\u2028" {
		t.Fatalf("content changed on the way through the database")
	}
	if m := got.Messages[1]; m.Model != "m" || m.Failed != "why" || m.ReasoningField != "reasoning" {
		t.Fatalf("message fields dropped: %+v", m)
	}
}

// TestBadIDs: ids that are not [A-Za-z0-9._-] are not sessions.
func TestBadIDs(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	for _, id := range []string{"", "a/b", "a b", "x'; DROP TABLE ak_sessions; --", strings.Repeat("a", 129)} {
		if err := s.Commit(ctx, id, kernel.Step{}); err == nil {
			t.Errorf("Commit(%q) succeeded", id)
		}
		if _, err := s.Load(ctx, id); !errors.Is(err, kernel.ErrSessionNotFound) {
			t.Errorf("Load(%q) = %v, want ErrSessionNotFound", id, err)
		}
	}
}

// TestEventsNotify: an append announces the session's new last event on
// channel ak_events, in the same transaction (a listener that sees the
// notice reads the events).
func TestEventsNotify(t *testing.T) {
	s := open(t).(*postgres.Store)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Commit(ctx, "e1", kernel.Step{Meta: kernel.SessionMeta{Updated: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	got := make(chan replica.Notice, 4)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan struct{})
	go s.Listen(lctx, func(n replica.Notice) {
		if n.Kind == "resync" {
			select {
			case ready <- struct{}{}:
			default:
			}
			return
		}
		got <- n
	})
	<-ready
	data := json.RawMessage(`{"type":"x"}`)
	if _, err := s.AppendEvents(ctx, "e1", 0, []kernel.StoredEvent{{Type: "x", Data: data}, {Type: "y", Data: data}}); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n.Kind != "events" || n.Session != "e1" || n.Seq != 2 {
			t.Fatalf("notice = %+v, want events of e1 up to 2", n)
		}
	case <-ctx.Done():
		t.Fatal("no notice")
	}
}

func TestQueueConformance(t *testing.T) {
	kerneltest.TestQueue(t, func(t *testing.T) (func(string) replica.Queue, func(string)) {
		s, _ := openStore(t, postgres.Options{})
		return s.Queue, func(id string) {
			if err := s.Commit(context.Background(), id, kernel.Step{Meta: kernel.SessionMeta{Status: kernel.StatusIdle}}); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestClaimRun: ClaimRun takes the session's lease and records the run in
// one statement; when the lease is held, it records nothing (and says
// who holds it); on a session that does not exist, ErrSessionNotFound.
func TestClaimRun(t *testing.T) {
	s, _ := openStore(t, postgres.Options{})
	ctx := context.Background()
	if err := s.Commit(ctx, "s", kernel.Step{Meta: kernel.SessionMeta{Status: kernel.StatusIdle, Created: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	var claimer replica.RunClaimer = s
	now := time.Now().UTC().Truncate(time.Millisecond)
	l, err := claimer.ClaimRun(ctx, replica.Run{ID: "run_1", SessionID: "s", Replica: "r1", Status: replica.RunRunning, Created: now, Record: json.RawMessage(`{"id":"run_1"}`)}, time.Minute)
	if err != nil || l.Holder != "r1" || l.Token == 0 {
		t.Fatalf("claim = %+v, %v", l, err)
	}
	run, ok, err := s.ActiveRun(ctx, "s")
	if err != nil || !ok || run.ID != "run_1" || run.Replica != "r1" || string(run.Record) != `{"id":"run_1"}` {
		t.Fatalf("active run = %+v, %v, %v; want run_1 recorded with the lease", run, ok, err)
	}
	_, err = claimer.ClaimRun(ctx, replica.Run{ID: "run_2", SessionID: "s", Replica: "r2", Status: replica.RunRunning, Created: now}, time.Minute)
	var held *kernel.LeaseHeldError
	if !errors.As(err, &held) || held.Holder != "r1" {
		t.Fatalf("second claim = %v, want the lease held by r1", err)
	}
	if _, err := s.GetRun(ctx, "run_2"); err == nil {
		t.Fatal("run_2 was recorded though its lease was refused")
	}
	if err := s.ReleaseLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	l2, err := claimer.ClaimRun(ctx, replica.Run{ID: "run_2", SessionID: "s", Replica: "r2", Status: replica.RunRunning, Created: now}, time.Minute)
	if err != nil || l2.Token <= l.Token {
		t.Fatalf("claim after release = %+v, %v; want a larger token", l2, err)
	}
	if _, err := claimer.ClaimRun(ctx, replica.Run{ID: "run_3", SessionID: "nope", Replica: "r1", Status: replica.RunRunning, Created: now}, time.Minute); !errors.Is(err, kernel.ErrSessionNotFound) {
		t.Fatalf("claim on a missing session = %v, want ErrSessionNotFound", err)
	}
}

// TestReleaseLeaseLeavesCommitsSynchronous: ReleaseLease commits without
// waiting for its WAL flush, for its own transaction only. On a pool of
// one connection, the connection every later commit uses still waits for
// its flush (synchronous_commit on), and the release still frees the
// lease and only the holder's.
func TestReleaseLeaseLeavesCommitsSynchronous(t *testing.T) {
	s, _ := openStore(t, postgres.Options{MaxConns: 1})
	ctx := context.Background()
	if err := s.Commit(ctx, "s", kernel.Step{Meta: kernel.SessionMeta{Status: kernel.StatusIdle, Created: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	l, err := s.AcquireLease(ctx, "s", "r1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseLease(ctx, kernel.Lease{SessionID: "s", Holder: "r2", Token: l.Token}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLease(ctx, "s", "r2", time.Minute); !errors.As(err, new(*kernel.LeaseHeldError)) {
		t.Fatalf("acquire after another holder's release = %v, want the lease still r1's", err)
	}
	if err := s.ReleaseLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	if v, err := postgres.SyncCommitSetting(ctx, s); err != nil || v != "on" {
		t.Fatalf("synchronous_commit after a release = %q, %v; want on (the release's setting must not outlive its transaction)", v, err)
	}
	l2, err := s.AcquireLease(ctx, "s", "r2", time.Minute)
	if err != nil || l2.Token <= l.Token {
		t.Fatalf("acquire after release = %+v, %v; want the lease with a larger token", l2, err)
	}
}
