package serve

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/replica"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
)

// TestEndOrphanAfterAResume: a run whose replica stopped is ended by a
// sweep as its session tells. An idle session is the run's own end, unless
// the session was resumed since: a sweep can resume the session (its lease
// lapsed) before it ends the run, and the resume may finish first; the run
// then stopped before its end and failed (cmd/kernel's TestReplicaFailover
// saw "completed" once).
func TestEndOrphanAfterAResume(t *testing.T) {
	ctx := context.Background()
	ps, err := postgres.Open(ctx, pgtest.Shared(t).Migrated(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	r := &replicas{st: ps}
	t0 := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
	put := func(id, sid, kind, status string, created time.Time) replica.Run {
		t.Helper()
		rec, _ := json.Marshal(runRec{ID: id, SessionID: sid, Kind: kind, Status: status, Created: created})
		run := replica.Run{ID: id, SessionID: sid, Replica: "a", Status: status, Created: created, Record: rec}
		if err := ps.PutRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		return run
	}
	for _, tc := range []struct {
		name    string
		resumed bool
		want    string
	}{{"idle, not resumed: the run's end", false, runCompleted}, {"idle after a resume: stopped before its end", true, runFailed}} {
		sid := kernel.NewID()
		if err := ps.Commit(ctx, sid, kernel.Step{Meta: kernel.SessionMeta{ID: sid, Status: kernel.StatusIdle, Created: t0, Updated: t0}}); err != nil {
			t.Fatal(err)
		}
		run := put("run_"+sid+"_a", sid, kindPrompt, runRunning, t0)
		if tc.resumed {
			put("run_"+sid+"_b", sid, kindResume, runCompleted, t0.Add(10*time.Second))
		}
		if status, _ := r.endOrphan(ctx, run); status != tc.want {
			t.Errorf("%s: the orphaned run ended %s, want %s", tc.name, status, tc.want)
		}
	}
}
