package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/policy"
)

// workspace is a set of recorder tools with the built-in tools' names,
// tiers and argument schemas.
type workspace struct {
	tools map[string]*kerneltest.Recorder
	reg   *kernel.Registry
}

func newWorkspace(t *testing.T) *workspace {
	t.Helper()
	w := &workspace{tools: map[string]*kerneltest.Recorder{}, reg: kernel.NewRegistry()}
	for _, spec := range policy.BuiltinSpecs() {
		r := kerneltest.NewRecorder(spec.Name, spec.Tier, spec.Name+" ok")
		r.ToolSpec.Schema = spec.Schema
		r.ToolSpec.Tags = spec.Tags
		r.ToolSpec.Source = spec.Source
		w.tools[spec.Name] = r
		if err := w.reg.Register(r); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *workspace) calls(name string) int { return len(w.tools[name].Calls()) }

// harness runs a real kernel over a memory store with a policy.
type harness struct {
	k      *kernel.Kernel
	prov   *kerneltest.Provider
	store  *memory.Store
	mu     sync.Mutex
	events []kernel.Event
}

func newHarness(t *testing.T, ws *workspace, pol kernel.Policy, cfg kernel.Config, replies ...kerneltest.Reply) *harness {
	t.Helper()
	h := &harness{prov: kerneltest.NewProvider(replies...), store: memory.New()}
	cfg.Provider, cfg.Store, cfg.Tools, cfg.Policy = h.prov, h.store, ws.reg, pol
	if cfg.Model == "" {
		cfg.Model = "m"
	}
	cfg.OnEvent = func(e kernel.Event) {
		h.mu.Lock()
		h.events = append(h.events, e)
		h.mu.Unlock()
	}
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.k = k
	return h
}

func (h *harness) decisions() []kernel.PolicyDecided {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []kernel.PolicyDecided
	for _, e := range h.events {
		if d, ok := e.(kernel.PolicyDecided); ok {
			out = append(out, d)
		}
	}
	return out
}

func (h *harness) offered(t *testing.T, request int) []string {
	t.Helper()
	reqs := h.prov.Requests()
	if request >= len(reqs) {
		t.Fatalf("only %d requests", len(reqs))
	}
	var names []string
	for _, s := range reqs[request].Tools {
		names = append(names, s.Name)
	}
	return names
}

func (h *harness) toolMessages(t *testing.T, session string) []kernel.Message {
	t.Helper()
	s, err := h.store.Load(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	var out []kernel.Message
	for _, m := range s.Messages {
		if m.Role == kernel.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

func loadExample(t *testing.T, name string, ws *workspace, opts policy.Options) *policy.Policy {
	t.Helper()
	opts.Tools = ws.reg.Specs()
	p, err := policy.LoadFile(context.Background(), "../examples/policies/"+name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestKernelCodingDenyAskApprove(t *testing.T) {
	ctx := context.Background()
	ws := newWorkspace(t)
	pol := loadExample(t, "coding.yaml", ws, policy.Options{})
	h := newHarness(t, ws, pol, kernel.Config{},
		kerneltest.Calls("run_command", map[string]any{"argv": []string{"rm", "-rf", "build"}}),
		kerneltest.Calls("write_file", map[string]any{"path": "README.md", "content": "new"}),
		kerneltest.Text("done"),
	)
	res, err := h.k.Run(ctx, "", "Please fix the typo in the README")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(h.offered(t, 0), ","); got != "read_file,list_dir,search,write_file,edit_file,run_command" {
		t.Fatalf("a change request was offered %s", got)
	}
	if ws.calls("run_command") != 0 {
		t.Fatal("rm -rf ran")
	}
	msgs := h.toolMessages(t, res.SessionID)
	if msgs[0].Content != "denied by policy: destructive command refused: rm -rf build" {
		t.Fatalf("the model read %q", msgs[0].Content)
	}
	if res.StopReason != kernel.StopAwaitingApproval || res.Pending == nil || res.Pending.RuleID != "writes-outside-src" ||
		res.Pending.Message != "write outside src/: README.md" {
		t.Fatalf("result = %+v, pending %+v", res, res.Pending)
	}
	if ws.calls("write_file") != 0 {
		t.Fatal("the write ran before approval")
	}
	ds := h.decisions()
	if len(ds) != 2 || ds[0].Decision.Effect != kernel.EffectDeny || ds[0].Decision.Rules[0] != "no-rm-rf" ||
		ds[1].Decision.Effect != kernel.EffectAsk || ds[0].Decision.Revision != "2026-11-23.1" || ds[0].Decision.SHA256 != pol.SHA256() ||
		ds[0].Decision.ID == "" || ds[0].Decision.ID == ds[1].Decision.ID {
		t.Fatalf("decisions = %+v", ds)
	}
	res, err = h.k.Resolve(ctx, res.SessionID, true, "fine")
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != kernel.StopCompleted || res.Output != "done" || ws.calls("write_file") != 1 {
		t.Fatalf("after approval: %+v, %d writes", res, ws.calls("write_file"))
	}
}

func TestKernelCodingReject(t *testing.T) {
	ctx := context.Background()
	ws := newWorkspace(t)
	pol := loadExample(t, "coding.yaml", ws, policy.Options{})
	h := newHarness(t, ws, pol, kernel.Config{},
		kerneltest.Calls("edit_file", map[string]any{"path": "src/.env", "old": "a", "new": "b"}),
	)
	res, err := h.k.Run(ctx, "", "update the token in src/.env")
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != kernel.StopAwaitingApproval || res.Pending.RuleID != "env-files" {
		t.Fatalf("result = %+v", res)
	}
	res, err = h.k.Resolve(ctx, res.SessionID, false, "not that file")
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "I did not run edit_file: rejected: not that file." || ws.calls("edit_file") != 0 {
		t.Fatalf("after reject: %+v", res)
	}
	if h.prov.Remaining() != 0 || len(h.prov.Requests()) != 1 {
		t.Fatal("the model was asked to narrate the rejection")
	}
}

func TestKernelCodingSurfaces(t *testing.T) {
	ctx := context.Background()
	ws := newWorkspace(t)
	pol := loadExample(t, "coding.yaml", ws, policy.Options{})
	read := func(p string) []any { return []any{"read_file", map[string]any{"path": p}} }
	h := newHarness(t, ws, pol, kernel.Config{},
		// A question: retrieval tools only; a write is refused by the kernel.
		kerneltest.Calls("write_file", map[string]any{"path": "src/a.go", "content": "x"}),
		kerneltest.Calls(append(append(read("a.go"), read("b.go")...), append(read("c.go"), read("d.go")...)...)...),
		kerneltest.Text("it loops"),
	)
	res, err := h.k.Run(ctx, "", "What does the loop do?")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(h.offered(t, 0), ","); got != "read_file,list_dir,search" {
		t.Fatalf("a question was offered %s", got)
	}
	if ws.calls("write_file") != 0 || res.Calls[0].Outcome != kernel.OutcomeDenied {
		t.Fatalf("a tool outside the surface ran: %+v", res.Calls[0])
	}
	if ws.calls("read_file") != 4 {
		t.Fatalf("%d reads", ws.calls("read_file"))
	}
	if got := h.offered(t, 2); len(got) != 0 {
		t.Fatalf("after four reads the model was still offered %v", got)
	}
	if res.StopReason != kernel.StopCompleted || res.Output != "it loops" {
		t.Fatalf("result = %+v", res)
	}
}

func TestKernelBudgetWrapUp(t *testing.T) {
	ctx := context.Background()
	ws := newWorkspace(t)
	pol := loadExample(t, "coding.yaml", ws, policy.Options{})
	h := newHarness(t, ws, pol, kernel.Config{Prices: map[string]kernel.Price{"m": {InputPerMTok: 5}}},
		kerneltest.Reply{Calls: kerneltest.Calls("read_file", map[string]any{"path": "a.go"}).Calls, Usage: kernel.Usage{InputTokens: 80_000}},
		kerneltest.Reply{Calls: kerneltest.Calls("read_file", map[string]any{"path": "b.go"}).Calls, Usage: kernel.Usage{InputTokens: 30_000}},
		kerneltest.Text("what I found so far"),
	)
	res, err := h.k.Run(ctx, "", "Where is the config parsed?")
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != kernel.BudgetStop("cost") || res.Output != "what I found so far" {
		t.Fatalf("result = %+v", res)
	}
	reqs := h.prov.Requests()
	if len(reqs) != 3 || len(reqs[2].Tools) != 0 {
		t.Fatalf("the wrap-up generation was offered tools: %d requests", len(reqs))
	}
	var warned, exceeded bool
	h.mu.Lock()
	for _, e := range h.events {
		switch e := e.(type) {
		case kernel.BudgetWarning:
			warned = warned || e.ID == "cost"
		case kernel.BudgetExceeded:
			exceeded = e.ID == "cost" && e.WrapUp && strings.Contains(e.Message, "of $0.5")
		}
	}
	h.mu.Unlock()
	if !warned || !exceeded {
		t.Fatalf("warning %t, exceeded %t", warned, exceeded)
	}
}

func TestKernelDryRun(t *testing.T) {
	ctx := context.Background()
	ws := newWorkspace(t)
	src := `
name: dry
revision: "1"
defaults: {tool_call: allow}
rules:
  - id: would-block-commands
    effect: deny
    mode: dryrun
    tools: [run_command]
    when: call.argv[0] == "make"
  - id: would-ask-writes
    effect: ask
    mode: dryrun
    tools: [write_file]
tests:
  - name: make would be denied
    input: {call: {tool: run_command, args: {argv: [make]}}}
    expect: {decision: allow, would_deny: [would-block-commands]}
  - name: writes would ask
    input: {call: {tool: write_file, args: {path: a}}}
    expect: {decision: allow, would_ask: [would-ask-writes]}
`
	pol, err := policy.Load(context.Background(), "dry.yaml", []byte(src), policy.Options{Tools: ws.reg.Specs()})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, ws, pol, kernel.Config{},
		kerneltest.Calls("run_command", map[string]any{"argv": []string{"make"}}),
		kerneltest.Text("built"),
	)
	res, err := h.k.Run(ctx, "", "build it")
	if err != nil {
		t.Fatal(err)
	}
	if ws.calls("run_command") != 1 {
		t.Fatal("a dry-run rule acted")
	}
	d := res.Calls[0].Decision
	if d == nil || d.Effect != kernel.EffectAllow || len(d.WouldDeny) != 1 || d.WouldDeny[0] != "would-block-commands" || len(d.Rules) != 0 {
		t.Fatalf("decision = %+v", d)
	}
	if ev := h.decisions(); len(ev) != 1 || len(ev[0].Decision.WouldDeny) != 1 {
		t.Fatalf("policy.decision events = %+v", ev)
	}
}

func TestKernelCIBotNeverAsks(t *testing.T) {
	ctx := context.Background()
	ws := newWorkspace(t)
	pol := loadExample(t, "ci-bot.yaml", ws, policy.Options{})
	h := newHarness(t, ws, pol, kernel.Config{},
		kerneltest.Calls("write_file", map[string]any{"path": "Makefile", "content": "x"}),
		kerneltest.Text("could not"),
	)
	res, err := h.k.Run(ctx, "", "fix the build")
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != kernel.StopCompleted || res.Pending != nil || ws.calls("write_file") != 0 {
		t.Fatalf("result = %+v", res)
	}
	msgs := h.toolMessages(t, res.SessionID)
	if !strings.Contains(msgs[0].Content, "denied by policy: write outside src/: Makefile (no approver") {
		t.Fatalf("the model read %q", msgs[0].Content)
	}
}

// TestDecisionLogRedaction proves argument values reach the log only
// through Redact: a secret in the arguments must not appear in the log.
func TestDecisionLogRedaction(t *testing.T) {
	const secret = "ghp_0123456789abcdefSECRET"
	for _, tc := range []struct {
		name     string
		redact   func(string) string
		wantArgs bool
	}{
		{"scrubbed", func(s string) string { return strings.ReplaceAll(s, secret, "[REDACTED]") }, true},
		{"no scrubber: no arguments", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ws := newWorkspace(t)
			var buf bytes.Buffer
			log := policy.NewDecisionLog(&buf, tc.redact)
			pol := loadExample(t, "coding.yaml", ws, policy.Options{Log: log})
			h := newHarness(t, ws, pol, kernel.Config{},
				kerneltest.Calls("run_command", map[string]any{"argv": []string{"rm", "-rf", "x", "--token=" + secret}}),
				kerneltest.Text("ok"),
			)
			if _, err := h.k.Run(ctx, "", "fix the deploy script"); err != nil {
				t.Fatal(err)
			}
			if log.Err() != nil {
				t.Fatal(log.Err())
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != 1 {
				t.Fatalf("log has %d lines:\n%s", len(lines), buf.String())
			}
			var rec policy.LogRecord
			if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(lines[0], secret) && tc.redact != nil {
				t.Fatalf("the secret reached the log: %s", lines[0])
			}
			if rec.Tool != "run_command" || rec.Decision.Effect != kernel.EffectDeny || rec.Decision.Rules[0] != "no-rm-rf" || rec.Policy != "coding" {
				t.Fatalf("record = %+v", rec)
			}
			if (rec.Args != nil) != tc.wantArgs {
				t.Fatalf("args = %v, want present %t", rec.Args, tc.wantArgs)
			}
			if tc.wantArgs && !strings.Contains(lines[0], `"--token=[REDACTED]"`) {
				t.Fatalf("redacted args missing: %s", lines[0])
			}
			if !tc.wantArgs && strings.Contains(lines[0], `"args"`) {
				t.Fatalf("arguments logged without a scrubber: %s", lines[0])
			}
		})
	}
}

// TestApprovalExpiry: an approval that outlives the kernel's TTL counts as
// rejected, whatever the approver says.
func TestApprovalExpiry(t *testing.T) {
	ctx := context.Background()
	ws := newWorkspace(t)
	pol := loadExample(t, "coding.yaml", ws, policy.Options{})
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := newHarness(t, ws, pol, kernel.Config{Now: clock, ApprovalTTL: time.Hour},
		kerneltest.Calls("write_file", map[string]any{"path": "docs/x.md", "content": "x"}),
	)
	res, err := h.k.Run(ctx, "", "write the docs")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	res, err = h.k.Resolve(ctx, res.SessionID, true, "")
	if err != nil {
		t.Fatal(err)
	}
	if ws.calls("write_file") != 0 || !strings.Contains(res.Output, "approval expired") {
		t.Fatalf("after expiry: %+v", res)
	}
}
