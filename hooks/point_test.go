package hooks

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// pointRig is a real kernel whose lifecycle points are a Chain's (and Go
// hooks'), with a scripted provider.
type pointRig struct {
	t     *testing.T
	prov  *kerneltest.Provider
	k     *kernel.Kernel
	store kernel.Store
	chain *Chain
	tools []kernel.Tool

	mu     sync.Mutex
	events []kernel.Event
}

type pointOpts struct {
	yaml    string       // the hooks: section
	goHooks []*PointHook // after the configured ones
	tools   []kernel.Tool
	window  int // context window: 0 for none
	maxCont int
	opts    *Options // the Chain's; nil: Dir is the working directory
}

func newPointRig(t *testing.T, o pointOpts, replies ...kerneltest.Reply) *pointRig {
	t.Helper()
	r := &pointRig{t: t, prov: kerneltest.NewProvider(replies...), store: memory.New()}
	if o.yaml == "" {
		o.yaml = "{}"
	}
	if o.opts == nil {
		r.chain = mustChain(t, o.yaml)
	} else {
		ch, err := NewChain(parseConfig(t, o.yaml), *o.opts)
		if err != nil {
			t.Fatal(err)
		}
		r.chain = ch
	}
	reg := kernel.NewRegistry()
	if err := reg.Register(o.tools...); err != nil {
		t.Fatal(err)
	}
	k, err := kernel.New(kernel.Config{
		Provider: r.prov, Store: r.store, Tools: reg, Model: "m", ContextWindow: o.window, MaxContinuations: o.maxCont,
		Hooks: []kernel.Hook{r.chain.Hook()}, Points: r.chain.Points(o.goHooks...),
		Context: kernel.ContextConfig{Compact: 1}, // compaction only when forced
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

func (r *pointRig) run(session, prompt string) (*kernel.RunResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return r.k.Run(ctx, session, prompt)
}

// hookEvents are the hook.* events as "type hook phase outcome/what".
func (r *pointRig) hookEvents() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		switch e := e.(type) {
		case kernel.HookBlocked:
			out = append(out, fmt.Sprintf("hook.blocked %s %s: %s", e.Hook, e.Phase, e.Reason))
		case kernel.HookRewrote:
			out = append(out, fmt.Sprintf("hook.rewrote %s %s %s", e.Hook, e.Phase, e.What))
		case kernel.HookFailed:
			out = append(out, fmt.Sprintf("hook.failed %s %s open=%v: %s", e.Hook, e.Phase, e.FailOpen, e.Error))
		case kernel.HookCompleted:
			out = append(out, fmt.Sprintf("hook.completed %s %s %s", e.Hook, e.Phase, e.Outcome))
		}
	}
	return out
}

func (r *pointRig) has(prefix string) bool {
	for _, e := range r.hookEvents() {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

func (r *pointRig) session(id string) *kernel.Session {
	s, err := r.store.Load(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	if p := kernel.CheckHistory(s.Messages, s.Pending); len(p) > 0 {
		r.t.Fatalf("history broken: %+v", p)
	}
	return s
}

// sent reports whether any request the model got has a message
// containing s.
func (r *pointRig) sent(s string) bool {
	for _, req := range r.prov.Requests() {
		for _, m := range req.Messages {
			if strings.Contains(m.Content, s) {
				return true
			}
		}
	}
	return false
}

// kindRule is a hook of one kind at one point that either blocks or
// changes something, as the table below asks.
type kindRule struct {
	yaml   string     // a rule of the configuration, or
	goHook *PointHook // a Go hook
}

// pointReplies are command hook replies that change something at each
// point: what the Go hooks answer too.
var pointReplies = map[kernel.HookPoint]string{
	kernel.PointRunStart:      `{"decision":"allow","context":"CTX-MARK"}`,
	kernel.PointBeforeCompact: `{"decision":"allow","instructions":"KEEP-MARK"}`,
	kernel.PointBeforeModel:   `{"decision":"allow","context":"CTX-MARK"}`,
	kernel.PointAfterModel:    `{"decision":"allow","text":"TEXT-MARK"}`,
	kernel.PointRunEnd:        `{"decision":"allow","note":"NOTE-MARK"}`,
}

func goReply(p kernel.HookPoint) Reply {
	rep, err := ParseReply(p, []byte(pointReplies[p]))
	if err != nil {
		panic(err)
	}
	return *rep
}

// kinds returns, for a point, each kind's blocking and changing rules
// (nil where the kind cannot do that there).
func kinds(t *testing.T, p kernel.HookPoint) map[string][2]*kindRule {
	block := shellHook(t, `cat >/dev/null; printf '%s' '{"decision":"block","reason":"BLOCK-MARK"}'`)
	change := shellHook(t, `cat >/dev/null; printf '%s' '`+pointReplies[p]+`'`)
	rule := func(body string) *kindRule {
		return &kindRule{yaml: fmt.Sprintf("rules:\n  - name: k\n    phase: %s\n    %s\n", p, body)}
	}
	goHook := func(rep Reply) *kindRule {
		h, err := At(p, "k", func(context.Context, PointInput) (Reply, error) { return rep, nil })
		if err != nil {
			t.Fatal(err)
		}
		return &kindRule{goHook: h}
	}
	out := map[string][2]*kindRule{
		"go":         {goHook(Reply{Decision: Block, Reason: "BLOCK-MARK"}), goHook(goReply(p))},
		"command":    {rule("command: {argv: [" + block + "]}"), rule("command: {argv: [" + change + "]}")},
		"block_when": {rule("block_when: 'true'\n    message: BLOCK-MARK"), nil},
	}
	switch p {
	case kernel.PointRunStart, kernel.PointBeforeModel:
		out["set_context"] = [2]*kindRule{nil, rule(`set_context: '"CTX-MARK"'`)}
	}
	switch p {
	case kernel.PointRunStart, kernel.PointBeforeModel, kernel.PointAfterModel:
		out["redact"] = [2]*kindRule{nil, rule(`redact: ['4111[0-9 ]+']`)}
	}
	return out
}

// TestEveryKindAtEveryLifecyclePoint runs each hook kind at each
// lifecycle point through a real run: a blocking hook does what a block
// does there, a changing hook's change is what the model, the store and
// the result see, and the events name the hook and the point.
func TestEveryKindAtEveryLifecyclePoint(t *testing.T) {
	for _, p := range lifecycle() {
		for kind, rules := range kinds(t, p) {
			for i, kr := range rules {
				if kr == nil {
					continue
				}
				name := fmt.Sprintf("%s/%s/%s", p, kind, []string{"block", "change"}[i])
				t.Run(name, func(t *testing.T) {
					o := pointOpts{yaml: kr.yaml, window: 100000, maxCont: 1}
					if kr.goHook != nil {
						o.goHooks = []*PointHook{kr.goHook}
					}
					checkPoint(t, p, i == 0, kind, o)
				})
			}
		}
	}
}

// checkPoint drives one point and checks what a block (or change) does.
func checkPoint(t *testing.T, p kernel.HookPoint, block bool, kind string, o pointOpts) {
	const prompt = "pay with card 4111 1111 1111 1111"
	replies := []kerneltest.Reply{kerneltest.Text("answer 4111 1111 1111 1111"), kerneltest.Text("second"), kerneltest.Text("third"), kerneltest.Text("SUMMARY")}
	r := newPointRig(t, o, replies...)
	if p == kernel.PointBeforeCompact {
		res, err := r.run("", "first")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.run(res.SessionID, "second"); err != nil {
			t.Fatal(err)
		}
		rec, err := r.k.Compact(context.Background(), res.SessionID)
		if block {
			if err == nil || !strings.Contains(err.Error(), "BLOCK-MARK") || !strings.Contains(err.Error(), `hook "k" (before_compact)`) {
				t.Fatalf("a vetoed compaction: %v, %+v", err, rec)
			}
			if !r.has("hook.blocked k before_compact: BLOCK-MARK") {
				t.Fatalf("events %q", r.hookEvents())
			}
			return
		}
		if err != nil || rec == nil || rec.Instructions != "KEEP-MARK" || !r.sent("KEEP-MARK") {
			t.Fatalf("compaction %+v, %v: the instructions are not in the record or the summariser's request", rec, err)
		}
		return
	}
	res, err := r.run("", prompt)
	switch {
	case block && p == kernel.PointRunEnd:
		// block at run_end: the run goes on (once, maxCont 1), then the
		// second block is past the limit and fails closed.
		if err == nil || res.StopReason != kernel.StopGuardrail || !strings.Contains(err.Error(), "max_continuations (1)") {
			t.Fatalf("stop %s, err %v", res.StopReason, err)
		}
		if !r.sent("BLOCK-MARK") || len(r.prov.Requests()) != 2 {
			t.Fatalf("the run did not go on with the hook's message: %d requests", len(r.prov.Requests()))
		}
	case block:
		if err != nil || res.StopReason != kernel.StopGuardrail || res.Blocked == nil || res.Blocked.Hook != "k" ||
			res.Blocked.Point != p || res.Blocked.Reason != "BLOCK-MARK" {
			t.Fatalf("stop %s, blocked %+v, err %v", res.StopReason, res.Blocked, err)
		}
		s := r.session(res.SessionID)
		if p == kernel.PointAfterModel && strings.Contains(fmt.Sprint(s.Messages), "answer 4111") {
			t.Fatal("a blocked answer was stored")
		}
		if p == kernel.PointRunStart && len(r.prov.Requests()) != 0 {
			t.Fatal("a refused run reached the model")
		}
	default:
		if err != nil || res.StopReason != kernel.StopCompleted {
			t.Fatalf("stop %s, err %v", res.StopReason, err)
		}
		checkChange(t, r, p, kind, res)
	}
	want := fmt.Sprintf("hook.completed k %s ", p)
	if !r.has(want) {
		t.Fatalf("no %q in %q", want, r.hookEvents())
	}
}

// checkChange checks what a changing hook at p did.
func checkChange(t *testing.T, r *pointRig, p kernel.HookPoint, kind string, res *kernel.RunResult) {
	s := r.session(res.SessionID)
	stored := fmt.Sprint(s.Messages)
	switch {
	case kind == "redact" && p == kernel.PointAfterModel:
		if res.Output != "answer [REDACTED]" || strings.Contains(stored, "answer 4111") {
			t.Fatalf("output %q, stored %s", res.Output, stored)
		}
	case kind == "redact":
		if r.sent("4111") {
			t.Fatalf("the card number reached the model: %+v", r.prov.Requests())
		}
	case p == kernel.PointRunStart || p == kernel.PointBeforeModel:
		if !r.sent("CTX-MARK") || !strings.Contains(stored, "CTX-MARK") {
			t.Fatalf("context not sent (%v) or not stored: %s", r.sent("CTX-MARK"), stored)
		}
	case p == kernel.PointAfterModel:
		if res.Output != "TEXT-MARK" || strings.Contains(stored, "answer 4111") {
			t.Fatalf("output %q, stored %s", res.Output, stored)
		}
	case p == kernel.PointRunEnd:
		if len(res.Notes) != 1 || res.Notes[0] != (kernel.HookText{Hook: "k", Text: "NOTE-MARK"}) {
			t.Fatalf("notes %+v", res.Notes)
		}
	}
	if !r.has(fmt.Sprintf("hook.rewrote k %s", p)) {
		t.Fatalf("events %q", r.hookEvents())
	}
}

// TestReloadChangesAPointsHooks: a reload swaps a lifecycle point's hooks
// for the next point reached; a bad configuration keeps the old ones.
func TestReloadChangesAPointsHooks(t *testing.T) {
	r := newPointRig(t, pointOpts{yaml: "rules:\n  - name: ctx\n    phase: before_model\n    set_context: '\"FIRST\"'\n"},
		kerneltest.Text("a"), kerneltest.Text("b"), kerneltest.Text("c"))
	res, err := r.run("", "one")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.chain.Reload(parseConfig(t, "rules:\n  - name: ctx\n    phase: before_model\n    set_context: '\"SECOND\"'\n  - name: stop\n    phase: after_model\n    block_when: 'text == \"c\"'\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.run(res.SessionID, "two"); err != nil {
		t.Fatal(err)
	}
	bad := r.chain.Reload(parseConfig(t, "rules:\n  - name: ctx\n    phase: before_model\n    set_context: 'nope +'\n"))
	if bad == nil || !strings.Contains(bad.Error(), "the previous hooks stay in force") {
		t.Fatalf("bad reload: %v", bad)
	}
	res3, err := r.run(res.SessionID, "three")
	if err != nil || res3.StopReason != kernel.StopGuardrail || res3.Blocked.Hook != "stop" {
		t.Fatalf("the reloaded after_model hook did not run after a bad reload: %+v, %v", res3, err)
	}
	reqs := r.prov.Requests()
	last := func(i int) string { m := reqs[i].Messages; return m[len(m)-1].Content }
	if last(0) != "FIRST" || last(1) != "SECOND" || last(2) != "SECOND" {
		t.Fatalf("contexts %q %q %q", last(0), last(1), last(2))
	}
	// The first request's context is stored and sent again as it was.
	if !strings.Contains(fmt.Sprint(reqs[2].Messages), "FIRST") {
		t.Fatal("a stored context changed with the reload")
	}
}
