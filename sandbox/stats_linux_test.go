package sandbox_test

import (
	"errors"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/sandbox"
)

// TestCountersCountStartsAndLimits: the counters the metrics read
// (agentkernel_sandbox_starts_total, _limit_hits_total) count a confined
// start and the limit that stopped it.
func TestCountersCountStartsAndLimits(t *testing.T) {
	ws := newWorkspace(t)
	before := sandbox.Counters()
	g := workspaceGrant(ws)
	g.Timeout = sandbox.Duration(300 * time.Millisecond)
	_, err := run(t, g, ws, "sleep", "600")
	var le *sandbox.LimitError
	if !errors.As(err, &le) || le.Limit != "timeout" {
		t.Fatalf("want the timeout's LimitError, got %v", err)
	}
	after := sandbox.Counters()
	if after.Starts <= before.Starts {
		t.Errorf("starts %d, then %d: the start was not counted", before.Starts, after.Starts)
	}
	if after.LimitHits["timeout"] <= before.LimitHits["timeout"] {
		t.Errorf("timeout hits %d, then %d: the limit was not counted", before.LimitHits["timeout"], after.LimitHits["timeout"])
	}
}
