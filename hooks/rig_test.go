package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// rig is a real kernel with a scripted provider, for driving hooks through
// the loop.
type rig struct {
	t        *testing.T
	provider *kerneltest.Provider
	k        *kernel.Kernel
	store    kernel.Store
	mu       sync.Mutex
	events   []kernel.Event
}

type rigConfig struct {
	hooks  []kernel.Hook
	policy kernel.Policy
	tools  []kernel.Tool
}

func newRig(t *testing.T, rc rigConfig, replies ...kerneltest.Reply) *rig {
	t.Helper()
	r := &rig{t: t, provider: kerneltest.NewProvider(replies...), store: memory.New()}
	reg := kernel.NewRegistry()
	if err := reg.Register(rc.tools...); err != nil {
		t.Fatal(err)
	}
	k, err := kernel.New(kernel.Config{
		Provider: r.provider, Store: r.store, Tools: reg, Policy: rc.policy, Hooks: rc.hooks,
		OnEvent: func(e kernel.Event) {
			r.mu.Lock()
			r.events = append(r.events, e)
			r.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.k = k
	return r
}

func (r *rig) run() *kernel.RunResult {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := r.k.Run(ctx, "", "go")
	if err != nil {
		r.t.Fatalf("run: %v", err)
	}
	return res
}

// toolMessages are the tool messages of the last request the model got.
func (r *rig) toolMessages() []kernel.Message {
	r.t.Helper()
	reqs := r.provider.Requests()
	if len(reqs) == 0 {
		r.t.Fatal("the model got no request")
	}
	var out []kernel.Message
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == kernel.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

// toolMessage is the only tool message the model read.
func (r *rig) toolMessage() kernel.Message {
	r.t.Helper()
	ms := r.toolMessages()
	if len(ms) != 1 {
		r.t.Fatalf("the model read %d tool messages, want 1: %+v", len(ms), ms)
	}
	return ms[0]
}

// hookEvents renders the hook events as "type hook what/reason".
func (r *rig) hookEvents() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		switch e := e.(type) {
		case kernel.HookBlocked:
			out = append(out, fmt.Sprintf("hook.blocked %s %s %s: %s", e.Hook, e.Phase, e.Tool, e.Reason))
		case kernel.HookRewrote:
			out = append(out, fmt.Sprintf("hook.rewrote %s %s %s: %s", e.Hook, e.Phase, e.Tool, e.What))
		case kernel.HookFailed:
			out = append(out, fmt.Sprintf("hook.failed %s %s %s open=%v: %s", e.Hook, e.Phase, e.Tool, e.FailOpen, e.Error))
		}
	}
	return out
}

// storedToolMessages are the tool messages the store holds for a session.
func (r *rig) storedToolMessages(sessionID string) []kernel.Message {
	r.t.Helper()
	s, err := r.store.Load(context.Background(), sessionID)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []kernel.Message
	for _, m := range s.Messages {
		if m.Role == kernel.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

func (r *rig) hasEvent(prefix string) bool {
	for _, e := range r.hookEvents() {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

// textTool is a tool whose schema takes {"text": string, "n": integer}
// (text required, nothing else allowed) and that records the arguments it
// ran with.
type textTool struct {
	spec kernel.ToolSpec
	fn   func(args textArgs) (kernel.Result, error)
	mu   sync.Mutex
	seen []string
}

type textArgs struct {
	Text string `json:"text"`
	N    *int   `json:"n,omitempty"`
}

func newTextTool(name string, tier kernel.Tier, fn func(textArgs) (kernel.Result, error)) *textTool {
	if fn == nil {
		fn = func(a textArgs) (kernel.Result, error) { return kernel.Result{Content: "ran with " + a.Text}, nil }
	}
	return &textTool{
		spec: kernel.ToolSpec{
			Name: name, Description: "a test tool", Tier: tier, Source: "test", Tags: []string{"fs", "test"},
			Schema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer","minimum":0}},"required":["text"],"additionalProperties":false}`),
		},
		fn: fn,
	}
}

func (t *textTool) Spec() kernel.ToolSpec { return t.spec }

func (t *textTool) Call(_ context.Context, raw json.RawMessage) (kernel.Result, error) {
	var a textArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return kernel.Result{}, err
	}
	t.mu.Lock()
	t.seen = append(t.seen, string(raw))
	t.mu.Unlock()
	return t.fn(a)
}

func (t *textTool) calls() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.seen...)
}

// policyFake decides with a fixed effect and counts its decisions.
type policyFake struct {
	effect  kernel.Effect
	message string
	mu      sync.Mutex
	decided []string // tool and args, per decision
}

func (p *policyFake) Surface(_ context.Context, _ *kernel.State, tools []kernel.ToolSpec) []kernel.ToolSpec {
	return tools
}

func (p *policyFake) Decide(_ context.Context, _ *kernel.State, c *kernel.Call) kernel.Decision {
	p.mu.Lock()
	p.decided = append(p.decided, c.Tool().Name+" "+string(c.Args()))
	p.mu.Unlock()
	return kernel.Decision{ID: "d1", Effect: p.effect, Message: p.message, Rules: []string{"r1"}}
}

func (p *policyFake) Budget(context.Context, *kernel.State, kernel.BudgetPhase) kernel.BudgetVerdict {
	return kernel.BudgetVerdict{}
}

func (p *policyFake) decisions() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.decided...)
}

// parseConfig decodes the hooks: section the way kernel.yaml holds it.
func parseConfig(t testing.TB, src string) Config {
	t.Helper()
	var cfg Config
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("decode hooks config: %v\n%s", err, src)
	}
	return cfg
}

func mustChain(t testing.TB, src string) *Chain {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := NewChain(parseConfig(t, src), Options{Dir: wd})
	if err != nil {
		t.Fatalf("NewChain: %v", err)
	}
	return ch
}

var (
	_ kernel.Tool   = (*textTool)(nil)
	_ kernel.Policy = (*policyFake)(nil)
)
