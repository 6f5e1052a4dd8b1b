package hooks

import (
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
)

func TestDeclarativeHooks(t *testing.T) {
	long := strings.Repeat("a", 50) + strings.Repeat("m", 100) + strings.Repeat("z", 50)
	for _, tc := range []struct {
		name    string
		cfg     string
		args    map[string]any
		result  string // what the tool answers
		ran     string // args the tool ran with; "" for not run
		content string // what the model reads
		outcome kernel.Outcome
		event   string
	}{
		{
			name: "block_when blocks with the message",
			cfg: `
rules:
  - name: no-secrets-dir
    phase: before
    block_when: args.text startsWith "secrets/"
    message: the secrets directory is off limits`,
			args: map[string]any{"text": "secrets/prod.key"}, content: `blocked by hook "no-secrets-dir": the secrets directory is off limits`,
			outcome: kernel.OutcomeBlocked, event: "hook.blocked no-secrets-dir before echo: the secrets directory is off limits",
		},
		{
			name: "block_when lets others through",
			cfg: `
rules:
  - name: no-secrets-dir
    phase: before
    block_when: args.text startsWith "secrets/"`,
			args: map[string]any{"text": "src/main.go"}, ran: `{"text":"src/main.go"}`, content: "ran with src/main.go", outcome: kernel.OutcomeOK,
		},
		{
			name: "block_when after on the result",
			cfg: `
rules:
  - name: no-stack-traces
    phase: after
    block_when: result contains "panic:"
    message: internal error`,
			args: map[string]any{"text": "x"}, result: "panic: runtime error", ran: `{"text":"x"}`,
			content: `result withheld by hook "no-stack-traces": internal error`, outcome: kernel.OutcomeBlocked,
		},
		{
			name: "set_args merges and removes",
			cfg: `
rules:
  - name: cap-n
    match: (args.n ?? 0) > 10
    set_args: '{"n": 10, "text": upper(args.text)}'`,
			args: map[string]any{"text": "big", "n": 99}, ran: `{"n":10,"text":"BIG"}`, content: "ran with BIG", outcome: kernel.OutcomeOK,
			event: "hook.rewrote cap-n before echo: args",
		},
		{
			name: "set_args nil removes a key",
			cfg: `
rules:
  - name: drop-n
    set_args: '{"n": nil}'`,
			args: map[string]any{"text": "t", "n": 3}, ran: `{"text":"t"}`, content: "ran with t", outcome: kernel.OutcomeOK,
			event: "hook.rewrote drop-n before echo: args",
		},
		{
			name: "set_args invalid rewrite fails closed naming the hook",
			cfg: `
rules:
  - name: bad-rewrite
    set_args: '{"n": -1}'`,
			args: map[string]any{"text": "t"}, content: `not run: hook "bad-rewrite" (before) failed: rewritten arguments are invalid`,
			outcome: kernel.OutcomeError, event: "hook.failed bad-rewrite before echo open=false",
		},
		{
			name: "set_args with nothing to change emits nothing",
			cfg: `
rules:
  - name: same
    set_args: '{"text": args.text}'`,
			args: map[string]any{"text": "t"}, ran: `{"text":"t"}`, content: "ran with t", outcome: kernel.OutcomeOK,
		},
		{
			name: "redact",
			cfg: `
rules:
  - name: no-emails
    redact: ['[a-z.]+@example\.com', 'ssn=(\d{3}-\d{2}-\d{4})']`,
			args: map[string]any{"text": "x"}, result: "contact ada.l@example.com ssn=123-45-6789 ok", ran: `{"text":"x"}`,
			content: "contact [REDACTED] ssn=[REDACTED] ok", outcome: kernel.OutcomeOK, event: "hook.rewrote no-emails after echo: redacted",
		},
		{
			name: "truncate",
			cfg: `
rules:
  - name: short
    truncate: {head: 50, tail: 50}`,
			args: map[string]any{"text": "x"}, result: long, ran: `{"text":"x"}`,
			content: strings.Repeat("a", 50) + "\n[... 100 bytes (0 lines) cut by hook \"short\": kept the first 50 and the last 50 bytes ...]\n" + strings.Repeat("z", 50),
			outcome: kernel.OutcomeOK, event: "hook.rewrote short after echo: truncated",
		},
		{
			name: "matcher error fails closed",
			cfg: `
rules:
  - name: strict
    phase: before
    match: len(args.path) > 0
    block_when: "true"`,
			args: map[string]any{"text": "x"}, content: `not run: hook "strict" (before) failed: match`, outcome: kernel.OutcomeError,
			event: "hook.failed strict before echo open=false",
		},
		{
			name: "matcher error fail_open",
			cfg: `
rules:
  - name: lenient
    phase: before
    match: len(args.path) > 0
    fail: fail_open
    block_when: "true"`,
			args: map[string]any{"text": "x"}, ran: `{"text":"x"}`, content: "ran with x", outcome: kernel.OutcomeOK,
			event: "hook.failed lenient before echo open=true",
		},
		{
			name: "match restricts by tool, tier, source and tags",
			cfg: `
rules:
  - name: other-tools
    phase: before
    match: tool != "echo" || tier != "read_only" || source != "test" || !("fs" in tags)
    block_when: "true"`,
			args: map[string]any{"text": "x"}, ran: `{"text":"x"}`, content: "ran with x", outcome: kernel.OutcomeOK,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := mustChain(t, tc.cfg)
			tool := newTextTool("echo", kernel.TierReadOnly, nil)
			if tc.result != "" {
				tool.fn = func(textArgs) (kernel.Result, error) { return kernel.Result{Content: tc.result}, nil }
			}
			r := newRig(t, rigConfig{hooks: []kernel.Hook{ch.Hook()}, tools: []kernel.Tool{tool}},
				kerneltest.Calls("echo", tc.args), kerneltest.Text("ok"))
			res := r.run()
			calls := tool.calls()
			switch {
			case tc.ran == "" && len(calls) != 0:
				t.Fatalf("the tool ran: %v", calls)
			case tc.ran != "" && (len(calls) != 1 || calls[0] != tc.ran):
				t.Fatalf("the tool ran with %v, want %s", calls, tc.ran)
			}
			if m := r.toolMessage(); !strings.HasPrefix(m.Content, tc.content) {
				t.Fatalf("model read %q, want %q", m.Content, tc.content)
			}
			if res.Calls[0].Outcome != tc.outcome {
				t.Fatalf("outcome %s, want %s", res.Calls[0].Outcome, tc.outcome)
			}
			if tc.event != "" && !r.hasEvent(tc.event) {
				t.Fatalf("no event %q in %v", tc.event, r.hookEvents())
			}
			if tc.event == "" {
				if ev := r.hookEvents(); len(ev) != 0 && tc.outcome == kernel.OutcomeOK {
					t.Fatalf("unexpected events %v", ev)
				}
			}
		})
	}
}
