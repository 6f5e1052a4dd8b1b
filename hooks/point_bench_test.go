package hooks

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// answerProvider answers every request at once with a short text, after
// delay when set (a model's latency).
type answerProvider struct{ delay time.Duration }

func (p answerProvider) Stream(ctx context.Context, _ kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	if p.delay > 0 {
		t := time.NewTimer(p.delay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return kernel.Response{}, ctx.Err()
		case <-t.C:
		}
	}
	emit(kernel.Delta{Text: "It is a Go program."})
	return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, Content: "It is a Go program."}}, nil
}

// benchRun measures whole one-turn runs (prompt, one generation, the
// answer) of a kernel with points, each iteration in a new session of a
// store that forgets it.
func benchRun(b *testing.B, points kernel.Points, delay time.Duration) {
	store := memory.New()
	k, err := kernel.New(kernel.Config{Provider: answerProvider{delay}, Store: store, Model: "m", Points: points,
		OnEvent: func(kernel.Event) {}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := testutil.CPUTime()
	for b.Loop() {
		res, err := k.Run(ctx, "", "what is in the workspace?")
		if err != nil || res.StopReason != kernel.StopCompleted {
			b.Fatal(res, err)
		}
		if err := store.Delete(ctx, res.SessionID); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(testutil.CPUTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkPointHook measures one hook at each lifecycle point, of each
// kind, in a one-turn run: subtract "none" (no points) for the hook's
// cost; "empty-chain" is a Chain with no hooks at any point (the CLI's
// wiring: every point set, so that a reload can add hooks).
func BenchmarkPointHook(b *testing.B) {
	b.Run("none", func(b *testing.B) { benchRun(b, kernel.Points{}, 0) })
	b.Run("empty-chain", func(b *testing.B) { benchRun(b, mustChain(b, "{}").Points(), 0) })
	allow := shellHook(b, `cat >/dev/null; printf '%s' '{"decision":"allow"}'`)
	for _, p := range []kernel.HookPoint{kernel.PointRunStart, kernel.PointBeforeModel, kernel.PointAfterModel, kernel.PointRunEnd} {
		kinds := map[string]func(b *testing.B) kernel.Points{
			"go": func(b *testing.B) kernel.Points {
				h, err := At(p, "h", func(context.Context, PointInput) (Reply, error) { return Reply{}, nil })
				if err != nil {
					b.Fatal(err)
				}
				return Points(h)
			},
			"declarative": func(b *testing.B) kernel.Points {
				return mustChain(b, fmt.Sprintf("rules:\n  - {name: h, phase: %s, block_when: 'text contains \"rm -rf\"'}\n", p)).Points()
			},
			"command": func(b *testing.B) kernel.Points {
				return mustChain(b, fmt.Sprintf("rules:\n  - {name: h, phase: %s, command: {argv: [%s]}}\n", p, allow)).Points()
			},
		}
		for _, kind := range []string{"go", "declarative", "command"} {
			b.Run(string(p)+"/"+kind, func(b *testing.B) { benchRun(b, kinds[kind](b), 0) })
		}
	}
}

// BenchmarkGuardrailLatency measures what a guardrail adds to a run
// whose model takes 50ms: a hook taking 20ms run before the model call,
// the same hook beside it (concurrent), and the example command hook
// (examples/hooks/injection-guard.sh) both ways. Subtract "model-only".
func BenchmarkGuardrailLatency(b *testing.B) {
	const model = 50 * time.Millisecond
	slow := func(context.Context, PointInput) (Reply, error) {
		time.Sleep(20 * time.Millisecond)
		return Reply{}, nil
	}
	goHook := func(b *testing.B, opts ...Option) kernel.Points {
		h, err := At(kernel.PointBeforeModel, "guard", slow, opts...)
		if err != nil {
			b.Fatal(err)
		}
		return Points(h)
	}
	command := func(concurrent bool) func(b *testing.B) kernel.Points {
		return func(b *testing.B) kernel.Points {
			r := exampleHooks(b, "guardrail.yaml")
			if !concurrent {
				r = exampleHooks(b, "guardrail.yaml", "concurrent: true", "concurrent: false")
			}
			root, err := filepath.Abs("..")
			if err != nil {
				b.Fatal(err)
			}
			ch, err := NewChain(parseConfig(b, r), Options{Dir: root})
			if err != nil {
				b.Fatal(err)
			}
			return ch.Points()
		}
	}
	for _, c := range []struct {
		name   string
		points func(b *testing.B) kernel.Points
	}{
		{"model-only", func(*testing.B) kernel.Points { return kernel.Points{} }},
		{"go-20ms-before", func(b *testing.B) kernel.Points { return goHook(b) }},
		{"go-20ms-concurrent", func(b *testing.B) kernel.Points { return goHook(b, Concurrent()) }},
		{"command-before", command(false)},
		{"command-concurrent", command(true)},
	} {
		b.Run(c.name, func(b *testing.B) { benchRun(b, c.points(b), model) })
	}
}
