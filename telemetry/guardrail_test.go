package telemetry_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentkernel/agentkernel/hooks"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/telemetry/telemetrytest"
)

func at(t *testing.T, p kernel.HookPoint, name string, fn hooks.PointFunc, opts ...hooks.Option) *hooks.PointHook {
	t.Helper()
	h, err := hooks.At(p, name, fn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestGuardrailSpans: each hook at a lifecycle point is a guardrail span
// with its point and outcome, under the generation's chat span when one
// is in flight (an after_model hook, a guardrail beside the call) and
// under invoke_agent otherwise; the metrics count them by point and
// outcome.
func TestGuardrailSpans(t *testing.T) {
	started := make(chan struct{})
	points := hooks.Points(
		at(t, kernel.PointBeforeModel, "memory", func(context.Context, hooks.PointInput) (hooks.Reply, error) {
			return hooks.Reply{Context: "a note"}, nil
		}),
		at(t, kernel.PointBeforeModel, "injection", func(ctx context.Context, in hooks.PointInput) (hooks.Reply, error) {
			if in.Info().Run == 1 {
				return hooks.Reply{}, nil
			}
			select {
			case <-started: // the second run's call is in flight
			case <-ctx.Done():
				return hooks.Reply{}, ctx.Err()
			}
			return hooks.Reply{Decision: hooks.Block, Reason: "injection"}, nil
		}, hooks.Concurrent()),
		at(t, kernel.PointAfterModel, "pii", func(_ context.Context, in hooks.PointInput) (hooks.Reply, error) {
			s := strings.ReplaceAll(in.(*kernel.AfterModelInput).Answer.Content, "a@b.c", "[email]")
			return hooks.Reply{Text: &s}, nil
		}),
	)
	f := newPointsFixture(t, true, points, kerneltest.Text("mail a@b.c"), kerneltest.Reply{Wait: true, Started: started})
	res, err := f.k.Run(context.Background(), "", "hi")
	if err != nil || res.Output != "mail [email]" {
		t.Fatal(res, err)
	}
	if res, err := f.k.Run(context.Background(), res.SessionID, "again"); err != nil || res.StopReason != kernel.StopGuardrail {
		t.Fatal(res, err)
	}
	spans := f.spans(t)
	ids := map[string]string{} // span id -> name
	for _, s := range spans {
		ids[s.SpanContext.SpanID().String()] = s.Name
	}
	parent := func(s tracetest.SpanStub) string { return ids[s.Parent.SpanID().String()] }
	want := map[string]struct{ parent, outcome string }{
		"guardrail memory":    {"invoke_agent kernel", "changed"},
		"guardrail pii":       {"chat m1", "changed"},
		"guardrail injection": {"chat m1", "blocked"},
	}
	seen := map[string]int{}
	for _, s := range spans {
		w, ok := want[s.Name]
		if !ok {
			continue
		}
		seen[s.Name]++
		outcome, _ := attr(s, "agentkernel.hook.outcome")
		if s.Name == "guardrail injection" && outcome.AsString() == "allowed" {
			continue // the first run's pass
		}
		if p := parent(s); !strings.HasPrefix(p, strings.Fields(w.parent)[0]) || outcome.AsString() != w.outcome {
			t.Errorf("%s: parent %q, outcome %q; want %q, %q", s.Name, p, outcome.AsString(), w.parent, w.outcome)
		}
	}
	if seen["guardrail memory"] != 2 || seen["guardrail pii"] != 1 || seen["guardrail injection"] != 2 {
		t.Fatalf("guardrail spans %v", seen)
	}
	for _, s := range spans {
		if v, ok := attr(s, "gen_ai.output.messages"); ok && strings.Contains(v.AsString(), "a@b.c") {
			t.Fatalf("span %s records the answer before the hook changed it", s.Name)
		}
	}
	fams := telemetrytest.Scrape(t, f.tel.MetricsHandler(), "")
	for _, c := range []struct {
		point, outcome string
		n              float64
	}{{"before_model", "blocked", 1}, {"before_model", "allowed", 1}, {"before_model", "changed", 2}, {"after_model", "changed", 1}} {
		if v := telemetrytest.Value(fams, "agentkernel_hook_runs_total", map[string]string{"point": c.point, "outcome": c.outcome}); v != c.n {
			t.Errorf("hook_runs_total{%s,%s} = %v, want %v", c.point, c.outcome, v, c.n)
		}
	}
}
