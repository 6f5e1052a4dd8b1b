package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/anthropic"
	"github.com/agentkernel/agentkernel/kernel/provider/anthropic/anthropictest"
	"github.com/agentkernel/agentkernel/kernel/store/badger"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// thinking is what the emulated model thinks: characters an encoder may
// escape, so that a change of a byte on the way through a store shows.
const thinking = "Weather first: <city> & \"unit\" \u2028 naïve ✓"

// weatherModel answers the first request of a session with thinking and a
// get_weather call, the others with text.
func weatherModel(r *anthropictest.Request, n int) anthropictest.Step {
	last := r.Messages.Messages[len(r.Messages.Messages)-1]
	if len(r.Messages.Messages) == 1 {
		return anthropictest.Step{Thinking: thinking, Signature: "sig/+=" + strings.Repeat("Zm9v", 40), Text: "Checking.",
			Calls: []anthropictest.Call{{Name: "weather.get", Arguments: `{"city": "Paris"}`}}}
	}
	if last.Content[0].Type == "tool_result" {
		return anthropictest.Text("18 °C in Paris.")
	}
	return anthropictest.Text("Tomorrow too.")
}

func weatherTools(t *testing.T) *kernel.Registry {
	reg := kernel.NewRegistry()
	spec := kernel.ToolSpec{Name: "weather.get", Description: "The weather.", Tier: kernel.TierReadOnly,
		Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}
	if err := reg.Register(kernel.NewTool(spec, func(context.Context, json.RawMessage) (kernel.Result, error) {
		return kernel.Result{Content: `{"temp_c":18}`}, nil
	})); err != nil {
		t.Fatal(err)
	}
	return reg
}

func newKernel(t *testing.T, url string, store kernel.Store, onEvent func(kernel.Event)) *kernel.Kernel {
	t.Helper()
	p, err := anthropic.New(anthropic.Config{BaseURL: url, APIKeyEnv: "AGENTKERNEL_TEST_UNSET_KEY",
		Request: anthropic.RequestOptions{MaxTokens: 8000, Thinking: anthropic.Thinking{Type: "enabled", BudgetTokens: 2000}}})
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.New(kernel.Config{Provider: p, Store: store, Tools: weatherTools(t), Model: "claude-sonnet-4-5",
		SystemPrompt: "You answer about the weather.", OnEvent: onEvent,
		Retry: kernel.RetryPolicy{Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestResumeSendsThinkingExactly: a session whose first run had a signed
// thinking block is continued by a new kernel that reads it from the
// store: memory, Badger (closed and opened again), PostgreSQL, and a
// Badger store the session was exported from and imported into. The
// continuing request is the same, byte for byte, in every case, and
// carries the block as it came.
func TestResumeSendsThinkingExactly(t *testing.T) {
	type storeCase struct {
		name string
		// first and second are the stores of the first and second run.
		open func(t *testing.T) (first, second func() kernel.Store, session func(id string) string)
	}
	cases := []storeCase{
		{"memory", func(t *testing.T) (func() kernel.Store, func() kernel.Store, func(string) string) {
			s := memory.New()
			return func() kernel.Store { return s }, func() kernel.Store { return s }, func(id string) string { return id }
		}},
		{"badger", func(t *testing.T) (func() kernel.Store, func() kernel.Store, func(string) string) {
			dir := filepath.Join(t.TempDir(), "store")
			var s *badger.Store
			open := func() kernel.Store {
				if s != nil {
					s.Close()
				}
				var err error
				if s, err = badger.Open(dir, badger.Options{}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			return open, open, func(id string) string { return id }
		}},
		{"postgres", func(t *testing.T) (func() kernel.Store, func() kernel.Store, func(string) string) {
			dsn := pgtest.Shared(t).Migrated(t)
			open := func() kernel.Store {
				s, err := postgres.Open(context.Background(), dsn, postgres.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			return open, open, func(id string) string { return id }
		}},
		{"export and import", func(t *testing.T) (func() kernel.Store, func() kernel.Store, func(string) string) {
			from, err := badger.Open(filepath.Join(t.TempDir(), "a"), badger.Options{})
			if err != nil {
				t.Fatal(err)
			}
			to, err := badger.Open(filepath.Join(t.TempDir(), "b"), badger.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { from.Close(); to.Close() })
			move := func(id string) string {
				var buf bytes.Buffer
				if err := from.Export(context.Background(), id, &buf); err != nil {
					t.Fatal(err)
				}
				nid, err := to.Import(context.Background(), &buf)
				if err != nil {
					t.Fatal(err)
				}
				return nid
			}
			return func() kernel.Store { return from }, func() kernel.Store { return to }, move
		}},
	}
	var bodies [][]byte
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			first, second, move := tc.open(t)
			srv := anthropictest.NewResponder(t, weatherModel)
			res, err := newKernel(t, srv.URL(), first(), nil).Run(context.Background(), "", "Weather in Paris?")
			if err != nil || res.StopReason != kernel.StopCompleted {
				t.Fatalf("%v %+v", err, res)
			}
			id := move(res.SessionID)
			if _, err := newKernel(t, srv.URL(), second(), nil).Run(context.Background(), id, "And tomorrow?"); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d requests", len(reqs))
			}
			a := reqs[2].Messages.Messages[1].Content
			if a[0].Type != "thinking" || a[0].Thinking != thinking || a[0].Signature != "sig/+="+strings.Repeat("Zm9v", 40) {
				t.Fatalf("the resumed request's first answer: %+v", a[0])
			}
			if !bytes.Equal(reqs[1].Messages.Messages[1].Content[0].Raw, a[0].Raw) {
				t.Errorf("the thinking block's bytes differ between the run and its resumption:\n%s\n%s", reqs[1].Messages.Messages[1].Content[0].Raw, a[0].Raw)
			}
			bodies = append(bodies, reqs[2].Body)
		})
	}
	for i := 1; i < len(bodies); i++ {
		if !bytes.Equal(bodies[i], bodies[0]) {
			t.Errorf("store %q sent a different request than %q:\n%s\n%s", cases[i].name, cases[0].name, bodies[i], bodies[0])
		}
	}
}

// TestOverloadedThenSuccess: a 529 is retried by the kernel; the session
// holds one answer.
func TestOverloadedThenSuccess(t *testing.T) {
	srv := anthropictest.NewServer(t, anthropictest.Error(529, "Overloaded"), anthropictest.Text("Sunny."))
	var retries []kernel.ProviderRetry
	store := memory.New()
	k := newKernel(t, srv.URL(), store, func(e kernel.Event) {
		if r, ok := e.(kernel.ProviderRetry); ok {
			retries = append(retries, r)
		}
	})
	res, err := k.Run(context.Background(), "", "Weather?")
	if err != nil || res.Output != "Sunny." {
		t.Fatalf("%v %+v", err, res)
	}
	if len(retries) != 1 || retries[0].StatusCode != 529 || retries[0].Cause != "529" {
		t.Fatalf("retries %+v", retries)
	}
	se, _ := store.Load(context.Background(), res.SessionID)
	if n := len(se.Messages); n != 2 {
		t.Errorf("%d stored messages, want the prompt and one answer", n)
	}
}

// TestCutToolUseRunsOnce: a stream cut after a tool_use block started is
// retried from the start of the generation, and the tool runs once.
func TestCutToolUseRunsOnce(t *testing.T) {
	var calls atomic.Int32
	reg := kernel.NewRegistry()
	spec := kernel.ToolSpec{Name: "append", Description: "Append a line.", Tier: kernel.TierSideEffecting,
		Schema: json.RawMessage(`{"type":"object","properties":{"line":{"type":"string"}}}`)}
	if err := reg.Register(kernel.NewTool(spec, func(context.Context, json.RawMessage) (kernel.Result, error) {
		calls.Add(1)
		return kernel.Result{Content: "appended"}, nil
	})); err != nil {
		t.Fatal(err)
	}
	srv := anthropictest.NewServer(t,
		anthropictest.File(t, "testdata/cut_in_tool_use.sse"),
		anthropictest.Step{Text: "Appending the line.", Calls: []anthropictest.Call{{ID: "toolu_01CutCall", Name: "append", Arguments: `{"line": "once"}`}}},
		anthropictest.Text("Appended."))
	p, err := anthropic.New(anthropic.Config{BaseURL: srv.URL(), APIKeyEnv: "AGENTKERNEL_TEST_UNSET_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	var retry []kernel.ProviderRetry
	store := memory.New()
	k, err := kernel.New(kernel.Config{Provider: p, Store: store, Tools: reg, Model: "claude-sonnet-4-5",
		Retry: kernel.RetryPolicy{Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }},
		OnEvent: func(e kernel.Event) {
			if r, ok := e.(kernel.ProviderRetry); ok {
				retry = append(retry, r)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(context.Background(), "", "append once")
	if err != nil || res.Output != "Appended." {
		t.Fatalf("%v %+v", err, res)
	}
	if calls.Load() != 1 {
		t.Errorf("the tool ran %d times, want once", calls.Load())
	}
	if len(retry) != 1 || retry[0].Cause != "stream_cut" || retry[0].Superseded == 0 {
		t.Errorf("retries %+v", retry)
	}
	se, _ := store.Load(context.Background(), res.SessionID)
	n := 0
	for _, m := range se.Messages {
		n += len(m.ToolCalls)
	}
	if n != 1 {
		t.Errorf("%d tool calls stored, want 1", n)
	}
}

// TestRefusalEndsRun: a refusal is not retried; the run fails with the
// refusal named and the turn is left out of later requests.
func TestRefusalEndsRun(t *testing.T) {
	srv := anthropictest.NewServer(t, anthropictest.File(t, "testdata/sdk_refusal.sse"), anthropictest.Text("Hello."))
	k := newKernel(t, srv.URL(), memory.New(), nil)
	res, err := k.Run(context.Background(), "", "something refused")
	var mce *kernel.ModelCallError
	if !errors.As(err, &mce) || mce.Later || mce.Cause != "refusal" || res.StopReason != kernel.StopError {
		t.Fatalf("%v %+v", err, res)
	}
	if _, err := k.Run(context.Background(), res.SessionID, "hi"); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Requests()[1].Messages.Messages
	if len(msgs) != 1 || msgs[0].Content[0].Text != "hi" {
		t.Errorf("the refused turn was sent again: %+v", msgs)
	}
}
