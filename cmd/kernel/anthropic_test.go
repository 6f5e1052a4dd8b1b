package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/anthropic/anthropictest"
	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
	"github.com/agentkernel/agentkernel/kernel/provider/scripted"
)

// demoScript is the demo's scripted model, which the emulations below
// play over their wire formats.
func demoScript(t *testing.T) *scripted.Provider {
	t.Helper()
	s, err := scripted.Load(absPath("../../examples/demo/script.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return scripted.New(s)
}

// anthropicHistory reads a Messages request back into kernel messages.
func anthropicHistory(r *anthropictest.Request) []kernel.Message {
	var out []kernel.Message
	for _, m := range r.Messages.Messages {
		if m.Role == "assistant" {
			a := kernel.Message{Role: kernel.RoleAssistant}
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					a.Content += b.Text
				case "tool_use":
					a.ToolCalls = append(a.ToolCalls, kernel.ToolCall{ID: b.ID, Name: b.Name, Arguments: string(b.Input)})
				}
			}
			out = append(out, a)
			continue
		}
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				out = append(out, kernel.Message{Role: kernel.RoleUser, Content: b.Text})
			case "tool_result":
				var text strings.Builder
				for _, c := range b.Content {
					text.WriteString(c.Text)
				}
				out = append(out, kernel.Message{Role: kernel.RoleTool, ToolCallID: b.ToolUseID, Content: text.String(), IsError: b.IsError})
			}
		}
	}
	return out
}

// answer is the scripted model's answer to a history.
func answer(t *testing.T, sp *scripted.Provider, model string, msgs []kernel.Message) kernel.Message {
	resp, err := sp.Stream(context.Background(), kernel.Request{Model: model, Messages: msgs}, func(kernel.Delta) {})
	if err != nil {
		t.Errorf("the script: %v", err)
	}
	return resp.Message
}

// TestDemoAnthropic runs the demo's first story four ways: with the
// scripted model, against an OpenAI emulation, and against an Anthropic
// emulation with extended thinking, tools offered natively and then as
// text (--tool-protocol text), all playing the same script. The
// same tools run with the same arguments and return the same results, and
// the answer is the same. On the Anthropic side every request carries
// back each earlier answer's thinking block with its signature, first,
// and from the second request on the prompt cache serves the stable
// prefix.
func TestDemoAnthropic(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	cfg := demoCopy(t)
	const prompt = "What does this project do, what changed recently, and how is the nightly report deployed?"
	run := func(name string, extra ...string) storedRun {
		store := t.TempDir()
		args := append(append(append([]string{"run"}, cfg...), extra...), "--store", store, prompt)
		out, errOut, err := cli(t, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, errOut)
		}
		if !strings.Contains(out, "reached me as `[REDACTED]`") {
			t.Errorf("%s: stdout:\n%s", name, out)
		}
		r, _ := readRun(t, exportSession(t, store))
		return r
	}
	native := run("scripted")
	if len(native.Calls) != 7 {
		t.Fatalf("the scripted run made %d calls", len(native.Calls))
	}

	sp := demoScript(t)
	oa := openaitest.NewResponder(t, func(r *openaitest.Request, n int) openaitest.Step {
		var msgs []kernel.Message
		for _, m := range r.Chat.Messages {
			km := kernel.Message{Role: kernel.Role(m.Role), Content: string(m.Content), ToolCallID: m.ToolCallID}
			for _, c := range m.ToolCalls {
				km.ToolCalls = append(km.ToolCalls, kernel.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
			}
			msgs = append(msgs, km)
		}
		a := answer(t, sp, r.Chat.Model, msgs)
		step := openaitest.Step{Text: a.Content}
		for _, c := range a.ToolCalls {
			step.Calls = append(step.Calls, openaitest.Call{Name: c.Name, Arguments: c.Arguments})
		}
		return step
	})
	viaOpenAI := run("openai", "--provider", "openai", "--base-url", oa.URL(), "--api-key-env", "AGENTKERNEL_TEST_UNSET_KEY", "--model", "gpt-4o-mini")

	dir := t.TempDir()
	layer := filepath.Join(dir, "anthropic.yaml")
	if err := os.WriteFile(layer, []byte("model:\n  thinking: {type: enabled, budget_tokens: 2048}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// emulate plays sp over the Messages API with extended thinking.
	emulate := func(sp *scripted.Provider) *anthropictest.Server {
		var mu sync.Mutex
		return anthropictest.NewResponder(t, func(r *anthropictest.Request, n int) anthropictest.Step {
			mu.Lock()
			defer mu.Unlock()
			k := 0
			for _, m := range r.Messages.Messages {
				if m.Role != "assistant" {
					continue
				}
				k++
				if b := m.Content[0]; b.Type != "thinking" || b.Signature != fmt.Sprintf("anthropictest-signature-%d", k) || b.Thinking != fmt.Sprintf("Step %d: what next?", k) {
					t.Errorf("request %d: answer %d went back without its thinking block first: %+v", n, k, b)
				}
			}
			if r.Messages.MaxTokens != 64000 || !strings.Contains(string(r.Messages.Thinking), `"budget_tokens":2048`) {
				t.Errorf("request %d: max_tokens %d thinking %s", n, r.Messages.MaxTokens, r.Messages.Thinking)
			}
			a := answer(t, sp, r.Messages.Model, anthropicHistory(r))
			step := anthropictest.Step{Thinking: fmt.Sprintf("Step %d: what next?", n), Text: a.Content}
			for _, c := range a.ToolCalls {
				step.Calls = append(step.Calls, anthropictest.Call{Name: c.Name, Arguments: c.Arguments})
			}
			return step
		})
	}
	anthropicFlags := func(srv *anthropictest.Server) []string {
		return []string{"--config", layer, "--provider", "anthropic", "--base-url", srv.URL(), "--api-key-env", "AGENTKERNEL_TEST_UNSET_KEY", "--model", "claude-sonnet-4-5"}
	}
	an := emulate(sp)
	viaAnthropic := run("anthropic", anthropicFlags(an)...)

	// The same story with the tools offered as text: the model writes its
	// calls in the answer's text, no request carries native tools, the
	// thinking still goes back with each answer, and the run is the same.
	s, err := scripted.Load(absPath("../../examples/demo/script.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	textSP, err := scripted.NewText(s, "hermes")
	if err != nil {
		t.Fatal(err)
	}
	anText := emulate(textSP)
	viaAnthropicText := run("anthropic text protocol", append(anthropicFlags(anText), "--tool-protocol", "text")...)
	textReqs := anText.Requests()
	for i, r := range textReqs {
		if _, ok := r.Fields["tools"]; ok {
			t.Errorf("text protocol: request %d offers native tools", i+1)
		}
	}
	if len(textReqs) != 6 {
		t.Errorf("text protocol: %d requests, want 6", len(textReqs))
	}

	for name, r := range map[string]storedRun{"openai": viaOpenAI, "anthropic": viaAnthropic, "anthropic text protocol": viaAnthropicText} {
		if !reflect.DeepEqual(r, native) {
			t.Errorf("the %s run differs from the scripted one:\n%+v\nscripted:\n%+v", name, r, native)
		}
	}
	usage := an.Usage()
	if len(usage) != 6 {
		t.Fatalf("%d answers from the Anthropic emulation, want 6", len(usage))
	}
	// A request that offers the same tools as the one before reads the
	// prefix that request wrote (a changed surface changes the prefix).
	reqs := an.Requests()
	same := 0
	for i := 1; i < len(usage); i++ {
		if string(reqs[i].Fields["tools"]) != string(reqs[i-1].Fields["tools"]) {
			continue
		}
		same++
		if usage[i].CacheRead == 0 {
			t.Errorf("request %d read nothing from the cache: %+v", i+1, usage[i])
		}
	}
	if same < 3 {
		t.Errorf("only %d requests offered the tools of the one before", same)
	}
}

// TestAnthropicRunEvents: a run against the Anthropic emulation reports
// cache reads and writes in message.completed and run.completed, priced
// at the catalog's rates.
func TestAnthropicRunEvents(t *testing.T) {
	srv := anthropictest.NewServer(t,
		anthropictest.Step{Thinking: "Look first.", Calls: []anthropictest.Call{{Name: "list_dir", Arguments: `{"path":"."}`}}},
		anthropictest.Text("A Go project."))
	srv.Cache.MinTokens = 64
	events := filepath.Join(t.TempDir(), "events.jsonl")
	_, errOut, err := cli(t, "run", "--provider", "anthropic", "--base-url", srv.URL(), "--api-key-env", "AGENTKERNEL_TEST_UNSET_KEY",
		"--model", "claude-haiku-4-5", "--workspace", "../../examples/demo/workspace", "--store", t.TempDir(), "--events", events, "What is this?")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	b, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	var done struct {
		Usage   kernel.Usage `json:"usage"`
		CostUSD float64      `json:"cost_usd"`
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(line, `"type":"run.completed"`) {
			if err := json.Unmarshal([]byte(line), &done); err != nil {
				t.Fatal(err)
			}
		}
	}
	u := srv.Usage()
	want := kernel.Usage{}
	for _, x := range u {
		want.InputTokens += x.Total()
		want.CachedInputTokens += x.CacheRead
		want.CacheWriteTokens += x.CacheWrite
	}
	if done.Usage.InputTokens != want.InputTokens || done.Usage.CachedInputTokens != want.CachedInputTokens || done.Usage.CacheWriteTokens != want.CacheWriteTokens || want.CachedInputTokens == 0 || want.CacheWriteTokens == 0 {
		t.Fatalf("run.completed usage %+v, the server reported %+v", done.Usage, want)
	}
	price := kernel.Price{InputPerMTok: 1, CacheWriteInputPerMTok: 1.25, CachedInputPerMTok: 0.10, OutputPerMTok: 5}
	if c := price.Cost(done.Usage); c-done.CostUSD > 1e-12 || done.CostUSD-c > 1e-12 {
		t.Errorf("cost %.8f, the catalog's prices say %.8f", done.CostUSD, c)
	}
	if !strings.Contains(string(b), `"cache_write_input_tokens"`) {
		t.Error("no event carries cache_write_input_tokens")
	}
}

// TestInitAnthropic: `kernel init --provider anthropic` writes a
// configuration that runs against the Messages API with extended thinking,
// max_tokens from the catalog and cache breakpoints.
func TestInitAnthropic(t *testing.T) {
	dir := t.TempDir()
	ws, conf := filepath.Join(dir, "project"), filepath.Join(dir, "agent")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	code, _, stderr, msg := status(t, "init", "--provider", "anthropic", "--dir", conf, "--workspace", ws)
	if code != 0 || !strings.Contains(stderr, "export ANTHROPIC_API_KEY=") {
		t.Fatalf("init: exit %d %s %s", code, msg, stderr)
	}
	srv := anthropictest.NewServer(t, anthropictest.Step{Thinking: "Nothing to read.", Text: "Hello."})
	out, errOut, err := cli(t, "run", "--config", filepath.Join(conf, "kernel.yaml"), "--base-url", srv.URL(),
		"--api-key-env", "AGENTKERNEL_TEST_UNSET_KEY", "--store", t.TempDir(), "hi")
	if err != nil || !strings.Contains(out, "Hello.") {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	r := srv.Requests()[0]
	if r.Messages.Model != "claude-sonnet-4-5" || r.Messages.MaxTokens != 64000 || string(r.Messages.Thinking) != `{"budget_tokens":8000,"type":"enabled"}` || r.Breakpoints() == 0 {
		t.Errorf("request: model %s max_tokens %d thinking %s breakpoints %d", r.Messages.Model, r.Messages.MaxTokens, r.Messages.Thinking, r.Breakpoints())
	}
	if code, _, _, msg := status(t, "init", "--provider", "bedrock", "--dir", filepath.Join(dir, "x")); code != 2 || !strings.Contains(msg, "openai or anthropic") {
		t.Errorf("init --provider bedrock: exit %d %q", code, msg)
	}
}

// TestFallbackAcrossProviders: a fallback served by another API is sent
// there (model.overrides.<m>.provider), each API checks and sends only
// its own models' settings, and the answer is the fallback's.
func TestFallbackAcrossProviders(t *testing.T) {
	an := anthropictest.NewServer(t, anthropictest.Error(404, "model: claude-sonnet-4-5"))
	oa := openaitest.NewServer(t, openaitest.Text("From the fallback."))
	conf := filepath.Join(t.TempDir(), "kernel.yaml")
	body := fmt.Sprintf(`model:
  provider: anthropic
  name: claude-sonnet-4-5
  base_url: %s
  api_key_env: AGENTKERNEL_TEST_UNSET_KEY
  fallbacks: [gpt-4o-mini]
  overrides:
    claude-sonnet-4-5: {reasoning_effort: max}
    gpt-4o-mini: {provider: openai, base_url: %s, api_key_env: AGENTKERNEL_TEST_UNSET_KEY, reasoning_effort: minimal}
`, an.URL(), oa.URL())
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := cli(t, "run", "--config", conf, "--workspace", "../../examples/demo/workspace", "--store", t.TempDir(), "hi")
	if err != nil || !strings.Contains(out, "From the fallback.") {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	if got := string(an.Requests()[0].Fields["output_config"]); got != `{"effort":"max"}` {
		t.Errorf("anthropic output_config %s", got)
	}
	if r := oa.Requests(); len(r) != 1 || r[0].Chat.Model != "gpt-4o-mini" || r[0].Chat.ReasoningEffort != "minimal" {
		t.Errorf("openai requests %+v", r)
	}
}

// TestAnthropicBudgetsSeeCache: a policy's budgets see what the API
// reported and the catalog prices, cache reads and writes included: after
// each tool round a budget's message records run.tokens_in and
// run.cost_usd, which must equal the server's usage so far (all three
// input parts) and its cost at the catalog's rates.
func TestAnthropicBudgetsSeeCache(t *testing.T) {
	srv := anthropictest.NewServer(t,
		anthropictest.Step{Thinking: "Look first.", Calls: []anthropictest.Call{{Name: "list_dir", Arguments: `{"path":"."}`}}, OutputTokens: 300},
		anthropictest.Step{Thinking: "And the docs.", Calls: []anthropictest.Call{{Name: "list_dir", Arguments: `{"path":"docs"}`}}, OutputTokens: 700},
		anthropictest.Text("A Go project."))
	srv.Cache.MinTokens = 64
	output := []int64{300, 700}
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	body := `name: budget-probe
revision: "1"
defaults:
  tool_call: allow
budgets:
  - id: round-1
    warn_when: run.phase == "after_tools" && run.turn == 1
    message: 'string(run.tokens_in) + " " + string(run.cost_usd)'
  - id: round-2
    warn_when: run.phase == "after_tools" && run.turn == 2
    message: 'string(run.tokens_in) + " " + string(run.cost_usd)'
tests:
  - name: round 1
    input: {phase: after_tools, run: {turn: 1}}
    expect: {warnings: [round-1]}
  - name: round 2
    input: {phase: after_tools, run: {turn: 2}}
    expect: {warnings: [round-2]}
`
	if err := os.WriteFile(pol, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	events := filepath.Join(dir, "events.jsonl")
	_, errOut, err := cli(t, "run", "--provider", "anthropic", "--base-url", srv.URL(), "--api-key-env", "AGENTKERNEL_TEST_UNSET_KEY",
		"--model", "claude-haiku-4-5", "--policy", pol, "--workspace", "../../examples/demo/workspace", "--store", t.TempDir(), "--events", events, "What is this?")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	b, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.Contains(line, `"type":"budget.warning"`) {
			continue
		}
		var e struct{ ID, Message string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		seen[e.ID] = e.Message
	}
	usage := srv.Usage()
	if len(usage) != 3 || usage[1].CacheRead == 0 || usage[0].CacheWrite == 0 {
		t.Fatalf("the emulation reported %+v: want a write, then a read", usage)
	}
	price := kernel.Price{InputPerMTok: 1, CacheWriteInputPerMTok: 1.25, CachedInputPerMTok: 0.10, OutputPerMTok: 5}
	var sum kernel.Usage
	for i, id := range []string{"round-1", "round-2"} {
		u := usage[i]
		sum.InputTokens += u.Total()
		sum.CachedInputTokens += u.CacheRead
		sum.CacheWriteTokens += u.CacheWrite
		sum.OutputTokens += output[i]
		var tokens int64
		var cost float64
		if _, err := fmt.Sscanf(seen[id], "%d %g", &tokens, &cost); err != nil {
			t.Fatalf("budget %s: message %q: %v (warnings %v)", id, seen[id], err, seen)
		}
		want := price.Cost(sum)
		if tokens != sum.InputTokens || cost-want > 1e-12 || want-cost > 1e-12 {
			t.Errorf("budget %s saw tokens_in %d cost %.10f; the server's usage says %d, the catalog %.10f", id, tokens, cost, sum.InputTokens, want)
		}
	}
}

// TestAnthropicApprovalKeepsThinking: a tool-use turn with thinking that
// stops for an approval continues under `kernel approve`, and the request
// that carries the approved call's result sends the turn's thinking block
// back first, with its text and signature as they arrived (the API refuses
// the request otherwise).
func TestAnthropicApprovalKeepsThinking(t *testing.T) {
	const thinking = "Write it, then say so. <&> \u2028 é"
	srv := anthropictest.NewServer(t,
		anthropictest.Step{Thinking: thinking, Signature: "c2lnbmF0dXJlLW9mLXR1cm4tMQ==", Calls: []anthropictest.Call{{Name: "write_file", Arguments: `{"path":"NOTES.md","content":"remember the milk\n"}`}}},
		anthropictest.Text("Wrote NOTES.md."))
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "kernel.yaml")
	body := fmt.Sprintf(`model:
  provider: anthropic
  name: claude-sonnet-4-5
  base_url: %s
  api_key_env: AGENTKERNEL_TEST_UNSET_KEY
  thinking: {type: enabled, budget_tokens: 2048}
workspace: ws
policy: {file: %s}
tools:
  builtin:
    enable: [read_file, list_dir, search, write_file, edit_file, run_command]
`, srv.URL(), absPath("../../examples/policies/coding.yaml"))
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	_, errOut, err := cli(t, "run", "--config", conf, "--store", store, "write a note")
	if err != nil || !strings.Contains(errOut, "approval required: write_file") {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("%d requests before the approval, want 1", n)
	}
	id := sessionLine.FindStringSubmatch(errOut)[1]
	out, errOut, err := cli(t, "approve", "--store", store, "--yes", id)
	if err != nil || !strings.Contains(out, "Wrote NOTES.md.") {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "NOTES.md")); err != nil || string(b) != "remember the milk\n" {
		t.Fatalf("NOTES.md: %q %v", b, err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	msgs := reqs[1].Messages.Messages
	if len(msgs) != 3 || msgs[1].Role != "assistant" || len(msgs[1].Content) != 2 {
		t.Fatalf("the request after the approval: %+v", msgs)
	}
	b := msgs[1].Content[0]
	if b.Type != "thinking" || b.Thinking != thinking || b.Signature != "c2lnbmF0dXJlLW9mLXR1cm4tMQ==" {
		t.Errorf("the approved turn's thinking went back as %+v", b)
	}
	if r := msgs[2].Content; len(r) == 0 || r[0].Type != "tool_result" || r[0].ToolUseID != msgs[1].Content[1].ID || r[0].IsError {
		t.Errorf("the approved call's result went back as %+v", r)
	}
}
