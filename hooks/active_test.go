package hooks

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
)

// TestPointsActive: Chain.Points tells the loop which points have hooks
// in the configuration in force (the default chain: only the answer
// scrubber at after_model), extra Go hooks included, and a reload that
// adds a hook at an empty point makes it active.
func TestPointsActive(t *testing.T) {
	ch := mustChain(t, "{}")
	ps := ch.Points()
	for _, p := range kernel.HookPoints() {
		if ps.Active(p) {
			t.Errorf("default chain: Active(%s) = true", p)
		}
	}
	if err := ch.Reload(parseConfig(t, `rules: [{name: ctx, phase: run_start, set_context: '"be brief"'}]`)); err != nil {
		t.Fatal(err)
	}
	if !ps.Active(kernel.PointRunStart) {
		t.Error("after the reload: run_start has a hook, Active says no")
	}
	if ps.Active(kernel.PointRunEnd) {
		t.Error("after the reload: run_end has none, Active says yes")
	}
	h, err := At(kernel.PointBeforeModel, "go", func(context.Context, PointInput) (Reply, error) { return Reply{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if !Points(h).Active(kernel.PointBeforeModel) || Points(h).Active(kernel.PointRunStart) {
		t.Error("hooks.Points with a before_model hook: Active is wrong")
	}
}

// TestExtraHookActive: an extra Go hook given to Chain.Points makes its
// point active even when the configuration has none there.
func TestExtraHookActive(t *testing.T) {
	h, err := At(kernel.PointRunEnd, "go", func(context.Context, PointInput) (Reply, error) { return Reply{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if !mustChain(t, "{}").Points(h).Active(kernel.PointRunEnd) {
		t.Error("Active(run_end) with an extra hook there = false")
	}
}
