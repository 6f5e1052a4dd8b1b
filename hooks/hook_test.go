package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
)

func TestOrderOfExecution(t *testing.T) {
	var mu sync.Mutex
	var trace []string
	note := func(s string) {
		mu.Lock()
		trace = append(trace, s)
		mu.Unlock()
	}
	before := func(name string) kernel.Hook {
		return Before(name, func(context.Context, *kernel.Call) (Verdict, error) {
			note(name + ".before")
			return Verdict{}, nil
		})
	}
	after := func(name string) kernel.Hook {
		return After(name, func(context.Context, *kernel.Call, kernel.Result, error) (Verdict, error) {
			note(name + ".after")
			return Verdict{}, nil
		})
	}
	tool := newTextTool("echo", kernel.TierReadOnly, func(a textArgs) (kernel.Result, error) {
		note("tool")
		return kernel.Result{Content: a.Text}, nil
	})
	pol := &policyFake{effect: kernel.EffectAllow}
	// Policy runs between the before hooks and the tool; record it too.
	polNote := Before("policy-probe", func(context.Context, *kernel.Call) (Verdict, error) {
		note(fmt.Sprintf("decisions=%d", len(pol.decisions())))
		return Verdict{}, nil
	})
	r := newRig(t, rigConfig{
		hooks:  []kernel.Hook{before("a"), after("b"), before("c"), after("d"), polNote},
		policy: pol,
		tools:  []kernel.Tool{tool},
	}, kerneltest.Calls("echo", map[string]any{"text": "hi"}), kerneltest.Text("done"))
	r.run()
	want := []string{"a.before", "c.before", "decisions=0", "tool", "d.after", "b.after"}
	if !reflect.DeepEqual(trace, want) {
		t.Fatalf("order = %v, want %v", trace, want)
	}
	if len(pol.decisions()) != 1 {
		t.Fatalf("policy decided %d times, want 1", len(pol.decisions()))
	}
}

func TestBeforeBlock(t *testing.T) {
	tool := newTextTool("echo", kernel.TierSideEffecting, nil)
	pol := &policyFake{effect: kernel.EffectAllow}
	afterSaw := ""
	r := newRig(t, rigConfig{
		hooks: []kernel.Hook{
			After("audit", func(_ context.Context, _ *kernel.Call, res kernel.Result, err error) (Verdict, error) {
				afterSaw = fmt.Sprintf("%v|%s", errors.Is(err, kernel.ErrBlocked), res.Content)
				return Verdict{}, nil
			}),
			Before("veto", func(_ context.Context, c *kernel.Call) (Verdict, error) {
				if strings.Contains(c.Value()["text"].(string), "rm") {
					return Verdict{Block: true, Reason: "no deleting"}, nil
				}
				return Verdict{}, nil
			}),
		},
		policy: pol,
		tools:  []kernel.Tool{tool},
	}, kerneltest.Calls("echo", map[string]any{"text": "rm -rf /"}), kerneltest.Text("ok"))
	res := r.run()
	if got := tool.calls(); len(got) != 0 {
		t.Fatalf("a blocked call ran: %v", got)
	}
	if d := pol.decisions(); len(d) != 0 {
		t.Fatalf("policy was asked about a blocked call: %v", d)
	}
	m := r.toolMessage()
	if !m.IsError || m.Content != `blocked by hook "veto": no deleting` {
		t.Fatalf("model read %+v", m)
	}
	if res.Calls[0].Outcome != kernel.OutcomeBlocked {
		t.Fatalf("outcome = %s, want blocked", res.Calls[0].Outcome)
	}
	if afterSaw != `true|blocked by hook "veto": no deleting` {
		t.Fatalf("the outer after hook saw %q", afterSaw)
	}
	if !r.hasEvent("hook.blocked veto before echo: no deleting") {
		t.Fatalf("events: %v", r.hookEvents())
	}
}

func TestShortCircuit(t *testing.T) {
	tool := newTextTool("echo", kernel.TierReadOnly, nil)
	pol := &policyFake{effect: kernel.EffectDeny, message: "never"}
	innerRan := false
	r := newRig(t, rigConfig{
		hooks: []kernel.Hook{
			After("label", func(_ context.Context, _ *kernel.Call, res kernel.Result, _ error) (Verdict, error) {
				res.Content = "<" + res.Content + ">"
				return Verdict{Result: &res}, nil
			}),
			Before("cache", func(context.Context, *kernel.Call) (Verdict, error) {
				return Verdict{Result: &kernel.Result{Content: "cached answer"}}, nil
			}),
			Before("inner", func(context.Context, *kernel.Call) (Verdict, error) {
				innerRan = true
				return Verdict{}, nil
			}),
		},
		policy: pol,
		tools:  []kernel.Tool{tool},
	}, kerneltest.Calls("echo", map[string]any{"text": "x"}), kerneltest.Text("ok"))
	res := r.run()
	if len(tool.calls()) != 0 || innerRan || len(pol.decisions()) != 0 {
		t.Fatalf("short-circuit went on: tool %v, inner hook %v, policy %v", tool.calls(), innerRan, pol.decisions())
	}
	if m := r.toolMessage(); m.Content != "<cached answer>" || m.IsError {
		t.Fatalf("model read %+v", m)
	}
	if res.Calls[0].Outcome != kernel.OutcomeOK {
		t.Fatalf("outcome %s", res.Calls[0].Outcome)
	}
	if !r.hasEvent("hook.rewrote cache before echo: short_circuit") || !r.hasEvent("hook.rewrote label after echo: result") {
		t.Fatalf("events: %v", r.hookEvents())
	}
}

func TestArgsRewriteRevalidated(t *testing.T) {
	rewrite := func(args string, mode FailMode) kernel.Hook {
		return Before("rewriter", func(context.Context, *kernel.Call) (Verdict, error) {
			return Verdict{Args: json.RawMessage(args)}, nil
		}, Fail(mode))
	}
	t.Run("valid", func(t *testing.T) {
		tool := newTextTool("echo", kernel.TierReadOnly, nil)
		pol := &policyFake{effect: kernel.EffectAllow}
		r := newRig(t, rigConfig{hooks: []kernel.Hook{rewrite(`{"text":"safe","n":1}`, FailClosed)}, policy: pol, tools: []kernel.Tool{tool}},
			kerneltest.Calls("echo", map[string]any{"text": "orig"}), kerneltest.Text("ok"))
		res := r.run()
		if got := tool.calls(); len(got) != 1 || got[0] != `{"text":"safe","n":1}` {
			t.Fatalf("tool ran with %v", got)
		}
		// Policy decided on the final arguments, and the audit trail has them.
		if d := pol.decisions(); len(d) != 1 || d[0] != `echo {"text":"safe","n":1}` {
			t.Fatalf("policy saw %v", d)
		}
		if res.Calls[0].Args != `{"text":"safe","n":1}` {
			t.Fatalf("recorded args %s", res.Calls[0].Args)
		}
		if !r.hasEvent("hook.rewrote rewriter before echo: args") {
			t.Fatalf("events: %v", r.hookEvents())
		}
	})
	t.Run("invalid fails closed naming the hook", func(t *testing.T) {
		tool := newTextTool("echo", kernel.TierReadOnly, nil)
		r := newRig(t, rigConfig{hooks: []kernel.Hook{rewrite(`{"text":"x","n":-5,"extra":true}`, FailClosed)}, tools: []kernel.Tool{tool}},
			kerneltest.Calls("echo", map[string]any{"text": "orig"}), kerneltest.Text("ok"))
		res := r.run()
		if len(tool.calls()) != 0 {
			t.Fatalf("tool ran with invalid rewritten args: %v", tool.calls())
		}
		m := r.toolMessage()
		if !m.IsError || !strings.Contains(m.Content, `hook "rewriter"`) || !strings.Contains(m.Content, "rewritten arguments are invalid") {
			t.Fatalf("model read %q", m.Content)
		}
		if res.Calls[0].Outcome != kernel.OutcomeError || !strings.Contains(res.Calls[0].Error, `hook "rewriter"`) {
			t.Fatalf("record %+v", res.Calls[0])
		}
		if !r.hasEvent("hook.failed rewriter before echo open=false") {
			t.Fatalf("events: %v", r.hookEvents())
		}
	})
	t.Run("invalid fail_open keeps the original args", func(t *testing.T) {
		tool := newTextTool("echo", kernel.TierReadOnly, nil)
		r := newRig(t, rigConfig{hooks: []kernel.Hook{rewrite(`{"n":1}`, FailOpen)}, tools: []kernel.Tool{tool}},
			kerneltest.Calls("echo", map[string]any{"text": "orig"}), kerneltest.Text("ok"))
		r.run()
		if got := tool.calls(); len(got) != 1 || got[0] != `{"text":"orig"}` {
			t.Fatalf("tool ran with %v", got)
		}
		if !r.hasEvent("hook.failed rewriter before echo open=true") {
			t.Fatalf("events: %v", r.hookEvents())
		}
	})
}

func TestAfterRewriteReachesModel(t *testing.T) {
	tool := kerneltest.EchoTool("echo")
	r := newRig(t, rigConfig{
		hooks: []kernel.Hook{After("upper", func(_ context.Context, _ *kernel.Call, res kernel.Result, _ error) (Verdict, error) {
			return Verdict{Result: &kernel.Result{Content: strings.ToUpper(res.Content)}, Context: "shouted"}, nil
		})},
		tools: []kernel.Tool{tool},
	}, kerneltest.Calls("echo", map[string]any{"text": "quiet words"}), kerneltest.Text("ok"))
	r.run()
	if m := r.toolMessage(); m.Content != "QUIET WORDS\n\n[hook upper] shouted" {
		t.Fatalf("model read %q", m.Content)
	}
}

func TestAfterBlockWithholdsResult(t *testing.T) {
	tool := kerneltest.EchoTool("echo")
	r := newRig(t, rigConfig{
		hooks: []kernel.Hook{After("dlp", func(_ context.Context, _ *kernel.Call, res kernel.Result, _ error) (Verdict, error) {
			if strings.Contains(res.Content, "confidential") {
				return Verdict{Block: true, Reason: "the result is confidential"}, nil
			}
			return Verdict{}, nil
		})},
		tools: []kernel.Tool{tool},
	}, kerneltest.Calls("echo", map[string]any{"text": "confidential plans"}), kerneltest.Text("ok"))
	res := r.run()
	m := r.toolMessage()
	if strings.Contains(m.Content, "plans") || m.Content != `result withheld by hook "dlp": the result is confidential` {
		t.Fatalf("model read %q", m.Content)
	}
	if res.Calls[0].Outcome != kernel.OutcomeBlocked {
		t.Fatalf("outcome %s", res.Calls[0].Outcome)
	}
	if !r.hasEvent("hook.blocked dlp after echo: the result is confidential") {
		t.Fatalf("events: %v", r.hookEvents())
	}
}

func TestHookErrorFailModes(t *testing.T) {
	boom := errors.New("audit service down")
	for _, tc := range []struct {
		name     string
		phase    Phase
		mode     FailMode
		ran      bool
		content  string
		outcome  kernel.Outcome
		failOpen bool
	}{
		{"before closed", PhaseBefore, FailClosed, false, `not run: hook "h" (before) failed: audit service down`, kernel.OutcomeError, false},
		{"before open", PhaseBefore, FailOpen, true, "ran with x", kernel.OutcomeOK, true},
		{"after closed", PhaseAfter, FailClosed, true, `result withheld: hook "h" (after) failed: audit service down`, kernel.OutcomeError, false},
		{"after open", PhaseAfter, FailOpen, true, "ran with x", kernel.OutcomeOK, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := newTextTool("echo", kernel.TierReadOnly, nil)
			var h kernel.Hook
			if tc.phase == PhaseBefore {
				h = Before("h", func(context.Context, *kernel.Call) (Verdict, error) { return Verdict{}, boom }, Fail(tc.mode))
			} else {
				h = After("h", func(context.Context, *kernel.Call, kernel.Result, error) (Verdict, error) { return Verdict{}, boom }, Fail(tc.mode))
			}
			r := newRig(t, rigConfig{hooks: []kernel.Hook{h}, tools: []kernel.Tool{tool}},
				kerneltest.Calls("echo", map[string]any{"text": "x"}), kerneltest.Text("ok"))
			res := r.run()
			if ran := len(tool.calls()) == 1; ran != tc.ran {
				t.Fatalf("tool ran = %v, want %v", ran, tc.ran)
			}
			if m := r.toolMessage(); m.Content != tc.content {
				t.Fatalf("model read %q, want %q", m.Content, tc.content)
			}
			if res.Calls[0].Outcome != tc.outcome {
				t.Fatalf("outcome %s, want %s", res.Calls[0].Outcome, tc.outcome)
			}
			want := fmt.Sprintf("hook.failed h %s echo open=%v: audit service down", tc.phase, tc.failOpen)
			if ev := r.hookEvents(); len(ev) != 1 || ev[0] != want {
				t.Fatalf("events %v, want [%s]", ev, want)
			}
		})
	}
}

func TestApprovalPassesThrough(t *testing.T) {
	tool := newTextTool("echo", kernel.TierSideEffecting, nil)
	pol := &policyFake{effect: kernel.EffectAsk, message: "a human must look"}
	afterCalls := 0
	ch := mustChain(t, "{}") // the built-ins must pass it through too
	r := newRig(t, rigConfig{
		hooks: []kernel.Hook{
			ch.Hook(),
			After("after", func(context.Context, *kernel.Call, kernel.Result, error) (Verdict, error) {
				afterCalls++
				return Verdict{Result: &kernel.Result{Content: "rewritten"}}, nil
			}),
			Before("before", func(context.Context, *kernel.Call) (Verdict, error) { return Verdict{Context: "note"}, nil }),
		},
		policy: pol,
		tools:  []kernel.Tool{tool},
	}, kerneltest.Calls("echo", map[string]any{"text": "x"}))
	res := r.run()
	if res.StopReason != kernel.StopAwaitingApproval || res.Pending == nil {
		t.Fatalf("stop %s pending %v, want awaiting_approval", res.StopReason, res.Pending)
	}
	if afterCalls != 0 || len(tool.calls()) != 0 {
		t.Fatalf("after hook ran %d times, tool %d times, on a call awaiting approval", afterCalls, len(tool.calls()))
	}
	if res.Pending.Message != "a human must look" {
		t.Fatalf("pending %+v", res.Pending)
	}
}

func TestMatcherSelectsCalls(t *testing.T) {
	m, err := NewMatcher(`tool == "write" && "fs" in tags && tier == "side_effecting" && source == "test" && args.text startsWith "/etc"`)
	if err != nil {
		t.Fatal(err)
	}
	blockAll := Before("guard", func(context.Context, *kernel.Call) (Verdict, error) {
		return Verdict{Block: true, Reason: "protected path"}, nil
	}, When(m))
	read := newTextTool("read", kernel.TierReadOnly, nil)
	write := newTextTool("write", kernel.TierSideEffecting, nil)
	r := newRig(t, rigConfig{hooks: []kernel.Hook{blockAll}, tools: []kernel.Tool{read, write}},
		kerneltest.Calls("read", map[string]any{"text": "/etc/passwd"}, "write", map[string]any{"text": "/tmp/x"}, "write", map[string]any{"text": "/etc/hosts"}),
		kerneltest.Text("ok"))
	r.run()
	ms := r.toolMessages()
	got := []string{ms[0].Content, ms[1].Content, ms[2].Content}
	want := []string{"ran with /etc/passwd", "ran with /tmp/x", `blocked by hook "guard": protected path`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("results %q, want %q", got, want)
	}
}
