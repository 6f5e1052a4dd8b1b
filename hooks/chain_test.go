package hooks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
)

// A secret read from a "file" by a tool.
const fileSecret = "AKIAZQDG2W3LL9TZQL8I"

func TestBuiltinsOnByDefault(t *testing.T) {
	ch := mustChain(t, "{}")
	big := strings.Repeat("line of output\n", 5000) // 75000 bytes
	tool := newTextTool("read_file", kernel.TierReadOnly, func(a textArgs) (kernel.Result, error) {
		if a.Text == "big" {
			return kernel.Result{Content: big}, nil
		}
		return kernel.Result{Content: "[default]\naws_access_key_id = " + fileSecret + "\nregion = eu-west-1\n"}, nil
	})
	r := newRig(t, rigConfig{hooks: []kernel.Hook{ch.Hook()}, tools: []kernel.Tool{tool}},
		kerneltest.Calls("read_file", map[string]any{"text": "~/.aws/credentials"}, "read_file", map[string]any{"text": "big"}),
		kerneltest.Text("ok"))
	res := r.run()
	ms := r.toolMessages()
	if want := "[default]\naws_access_key_id = [REDACTED]\nregion = eu-west-1\n"; ms[0].Content != want {
		t.Fatalf("model read %q, want %q", ms[0].Content, want)
	}
	if len(ms[1].Content) > DefaultMaxBytes+200 || !strings.Contains(ms[1].Content, "cut by output_limit") {
		t.Fatalf("a %d-byte result reached the model as %d bytes", len(big), len(ms[1].Content))
	}
	if !strings.HasPrefix(ms[1].Content, big[:DefaultMaxBytes*3/4]) || !strings.HasSuffix(ms[1].Content, big[len(big)-DefaultMaxBytes/4:]) {
		t.Fatal("the limiter did not keep the head and the tail")
	}
	if !r.hasEvent("hook.rewrote scrubber after read_file: redacted") || !r.hasEvent("hook.rewrote output_limit after read_file: truncated") {
		t.Fatalf("events %v", r.hookEvents())
	}
	// The store holds the scrubbed result too.
	stored := r.storedToolMessages(res.SessionID)
	if len(stored) != 2 || stored[0].Content != ms[0].Content {
		t.Fatalf("stored %+v", stored)
	}
}

// TestScrubberAttack proves the scrubber is what keeps secrets out: with it
// disabled, the same secret reaches the model.
func TestScrubberAttack(t *testing.T) {
	for _, tc := range []struct {
		cfg    string
		leaked bool
	}{
		{"{}", false},
		{"scrubber: {enabled: false}", true},
	} {
		ch := mustChain(t, tc.cfg)
		tool := newTextTool("read_file", kernel.TierReadOnly, func(textArgs) (kernel.Result, error) {
			return kernel.Result{Content: "export GITHUB_TOKEN=ghp_WkPLR347A7TPdoE2u6Qe1NBPBTrbEpvpDbnI"}, nil
		})
		r := newRig(t, rigConfig{hooks: []kernel.Hook{ch.Hook()}, tools: []kernel.Tool{tool}},
			kerneltest.Calls("read_file", map[string]any{"text": ".envrc"}), kerneltest.Text("ok"))
		r.run()
		if leaked := strings.Contains(r.toolMessage().Content, "ghp_"); leaked != tc.leaked {
			t.Fatalf("%s: leaked = %v, want %v", tc.cfg, leaked, tc.leaked)
		}
	}
}

func TestChainScrubForLogs(t *testing.T) {
	ch := mustChain(t, "scrubber: {enabled: false, extra_patterns: ['corp-[0-9]{4}']}")
	if got := ch.Scrub("id corp-1234 key AKIA6PYCDYBK155OXTZ7"); got != "id [REDACTED] key [REDACTED]" {
		t.Fatalf("Scrub = %q", got)
	}
}

func TestScrubberOnErrors(t *testing.T) {
	const secret = "sk-96hExzIpIQftca4svm9zWxNV31eSjE8hlafb0tCYm89cZWHU"
	ch := mustChain(t, "{}")
	tool := newTextTool("fetch", kernel.TierReadOnly, func(textArgs) (kernel.Result, error) {
		return kernel.Result{}, fmt.Errorf("401 from api: invalid key %s", secret)
	})
	r := newRig(t, rigConfig{hooks: []kernel.Hook{ch.Hook()}, tools: []kernel.Tool{tool}},
		kerneltest.Calls("fetch", map[string]any{"text": "x"}), kerneltest.Text("ok"))
	res := r.run()
	m := r.toolMessage()
	if strings.Contains(m.Content, secret) || !m.IsError || !strings.Contains(m.Content, "invalid key [REDACTED]") {
		t.Fatalf("model read %+v", m)
	}
	rec := res.Calls[0]
	if strings.Contains(rec.Error, secret) || rec.Outcome != kernel.OutcomeError {
		t.Fatalf("audit record %+v", rec)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		b, _ := kernel.MarshalEvent(e)
		if strings.Contains(string(b), secret) {
			t.Fatalf("event leaks the secret: %s", b)
		}
	}
}

// TestScrubberSeesWhatHooksProduce: the scrubber runs on the final result,
// so a short-circuit or an after hook cannot smuggle a secret past it.
func TestScrubberSeesWhatHooksProduce(t *testing.T) {
	const secret = "xoxb-10872213746-8137237145620-Y3eXwYD9bG56ToaA2iiI4QQH"
	ch := mustChain(t, "{}")
	tool := newTextTool("echo", kernel.TierReadOnly, nil)
	r := newRig(t, rigConfig{
		hooks: []kernel.Hook{
			ch.Hook(),
			After("leaky-label", func(_ context.Context, _ *kernel.Call, _ kernel.Result, _ error) (Verdict, error) {
				return Verdict{Context: "slack: " + secret}, nil
			}),
			Before("leaky-cache", func(_ context.Context, c *kernel.Call) (Verdict, error) {
				if c.Value()["text"] == "cached" {
					return Verdict{Result: &kernel.Result{Content: "bot_token=" + secret}}, nil
				}
				return Verdict{}, nil
			}),
		},
		tools: []kernel.Tool{tool},
	}, kerneltest.Calls("echo", map[string]any{"text": "cached"}, "echo", map[string]any{"text": "run"}), kerneltest.Text("ok"))
	r.run()
	for _, m := range r.toolMessages() {
		if strings.Contains(m.Content, "Y3eXwYD9") {
			t.Fatalf("a hook smuggled a secret past the scrubber: %q", m.Content)
		}
	}
}

func TestReload(t *testing.T) {
	ch := mustChain(t, `rules: [{name: first, redact: ['alpha']}]`)
	h := ch.Hook()(kernel.HandlerFunc(func(context.Context, *kernel.Call) (kernel.Result, error) {
		return kernel.Result{Content: "alpha beta"}, nil
	}))
	call := testCall(t)
	if res, _ := h.Handle(context.Background(), call); res.Content != "[REDACTED] beta" {
		t.Fatalf("before reload: %q", res.Content)
	}
	if err := ch.Reload(parseConfig(t, `rules: [{name: second, redact: ['beta']}]`)); err != nil {
		t.Fatal(err)
	}
	if res, _ := h.Handle(context.Background(), call); res.Content != "alpha [REDACTED]" {
		t.Fatalf("after reload: %q", res.Content)
	}
	err := ch.Reload(parseConfig(t, `rules: [{name: third, redact: ['(']}]`))
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Name != "third" || ce.Field != "hooks.rules[0].redact[0]" || !strings.Contains(err.Error(), "previous hooks stay in force") {
		t.Fatalf("bad reload: %v", err)
	}
	if res, _ := h.Handle(context.Background(), call); res.Content != "alpha [REDACTED]" {
		t.Fatalf("a bad reload changed the chain: %q", res.Content)
	}
	if got := ch.Config().Rules[0].Name; got != "second" {
		t.Fatalf("config in force: %s", got)
	}
}

// TestReloadInFlight: a call that started before a reload finishes under
// the configuration it started with.
func TestReloadInFlight(t *testing.T) {
	ch := mustChain(t, `rules: [{name: a, redact: ['alpha']}]`)
	entered, release := make(chan struct{}), make(chan struct{})
	h := ch.Hook()(kernel.HandlerFunc(func(context.Context, *kernel.Call) (kernel.Result, error) {
		close(entered)
		<-release
		return kernel.Result{Content: "alpha beta"}, nil
	}))
	var res kernel.Result
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, _ = h.Handle(context.Background(), testCall(t))
	}()
	<-entered
	if err := ch.Reload(parseConfig(t, `rules: [{name: b, redact: ['beta']}]`)); err != nil {
		t.Fatal(err)
	}
	close(release)
	wg.Wait()
	if res.Content != "[REDACTED] beta" {
		t.Fatalf("in-flight call: %q", res.Content)
	}
}

// TestReloadHammer reloads while calls run: every call sees exactly one
// configuration, never a mix.
func TestReloadHammer(t *testing.T) {
	cfgA := parseConfig(t, `rules: [{name: a1, redact: ['alpha']}, {name: a2, redact: ['beta']}]`)
	cfgB := parseConfig(t, `rules: [{name: b1, redact: ['gamma']}, {name: b2, redact: ['delta']}]`)
	ch, err := NewChain(cfgA, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := ch.Hook()(kernel.HandlerFunc(func(context.Context, *kernel.Call) (kernel.Result, error) {
		return kernel.Result{Content: "alpha beta gamma delta"}, nil
	}))
	valid := map[string]bool{
		"[REDACTED] [REDACTED] gamma delta": true,
		"alpha beta [REDACTED] [REDACTED]":  true,
	}
	const workers, calls, reloads = 4, 200, 200
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for range workers {
		wg.Add(1)
		call := testCall(t) // the hooks here do not change it
		go func() {
			defer wg.Done()
			for range calls {
				res, err := h.Handle(context.Background(), call)
				if err != nil || !valid[res.Content] {
					errs <- fmt.Sprintf("%q %v", res.Content, err)
					return
				}
			}
		}()
	}
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for i := 0; i < reloads; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cfg := cfgA
			if i%2 == 0 {
				cfg = cfgB
			}
			if err := ch.Reload(cfg); err != nil {
				errs <- err.Error()
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	rwg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("a call saw a mixed configuration: %s", e)
	}
}

// testCall is a call outside the loop, with the echo schema.
func testCall(t testing.TB) *kernel.Call {
	t.Helper()
	return kerneltest.NewCall(t, "c1", newTextTool("echo", kernel.TierReadOnly, nil), `{"text":"x"}`, &kernel.State{SessionID: "s1", Turn: 1})
}
