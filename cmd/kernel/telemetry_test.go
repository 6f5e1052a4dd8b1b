package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentkernel/agentkernel/internal/mcptest"
	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
	"github.com/agentkernel/agentkernel/telemetry/telemetrytest"
)

// cliSpans runs the CLI in-process with its spans going to exp.
func cliSpans(t *testing.T, exp *tracetest.InMemoryExporter, args ...string) (string, string, error) {
	t.Helper()
	var out bytes.Buffer
	var errb testutil.SyncBuffer // the renderer and the log write it from different goroutines
	err := runEnv(context.Background(), args, &cliEnv{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, spans: keepSpans{exp}})
	return out.String(), errb.String(), err
}

// keepSpans keeps the spans when the command shuts its exporter down (an
// InMemoryExporter forgets them then).
type keepSpans struct{ *tracetest.InMemoryExporter }

func (keepSpans) Shutdown(context.Context) error { return nil }

// traceSetup writes a workspace with a git repository, the MCP test
// server's policy and a config whose tools are a built-in, the git plugin
// and the MCP test server (exporting its own spans to col).
func traceSetup(t *testing.T, col *telemetrytest.Collector, script, extra string) (cfgPath, ws string) {
	return traceSetupModel(t, col, "model: {provider: scripted, name: m, script: script.yaml}\n", script, extra)
}

// traceSetupModel is traceSetup with the model: line given.
func traceSetupModel(t *testing.T, col *telemetrytest.Collector, modelLine, script, extra string) (cfgPath, ws string) {
	t.Helper()
	root := artifacts(t, "bin/plugins/git", "bin/plugins/git.sha256")
	dir := t.TempDir()
	ws = filepath.Join(dir, "ws")
	os.MkdirAll(filepath.Join(dir, "server"), 0o700)
	os.MkdirAll(ws, 0o700)
	os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("deploy token sk-live-CANARY-4242\n"), 0o600)
	gitCommit(t, ws, "first")
	sum, err := os.ReadFile(filepath.Join(root, "bin/plugins/git.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.HTTPEndpoint) // for the MCP server: the kernel's spans go to its own exporter
	os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(mcpPolicy), 0o600)
	os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(script), 0o600)
	cfg := modelLine + "workspace: ws\npolicy: {file: policy.yaml}\n" +
		"hooks:\n  rules:\n    - name: canary\n      phase: after\n      match: 'true'\n      redact: ['CANARY-[0-9]+']\n" +
		"tools:\n  builtin: {enable: [read_file, write_file]}\n" +
		"  plugins:\n    - {name: git, path: " + filepath.Join(root, "bin/plugins/git") + ", sha256: " + strings.Fields(string(sum))[0] +
		", dir: ws, env: [PATH, HOME], sandbox: {fs: [{path: /usr, mode: ro}, {path: ws, mode: ro}]}}\n" +
		"  mcp:\n    - name: t\n      command: [" + mcptest.Server(t) + ", -calls, " + filepath.Join(dir, "server", "calls.log") + "]\n" +
		"      env: [OTEL_EXPORTER_OTLP_ENDPOINT]\n" +
		"      grant: {fs: [{path: server, mode: rw}], net: {connect: [" + strconv.Itoa(col.HTTPPort) + "]}}\n" +
		"      tiers: {echo: read_only}\n" + extra
	cfgPath = filepath.Join(dir, "kernel.yaml")
	os.WriteFile(cfgPath, []byte(cfg), 0o600)
	return cfgPath, ws
}

const traceScript = `steps:
  - tool_calls:
      - {name: read_file, args: {path: notes.txt}}
      - {name: git.git_log, args: {max_count: 1}}
      - {name: t.echo, args: {text: "hello"}}
  - tool_calls:
      - {name: t.write_note, args: {title: "my secret", body: "x"}}
  - tool_calls:
      - {name: t.write_note, args: {title: "groceries", body: "milk"}}
  - text: done
`

func spanAttr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			if kv.Value.Type() == attribute.STRINGSLICE {
				return strings.Join(kv.Value.AsStringSlice(), ",")
			}
			return kv.Value.Emit()
		}
	}
	return ""
}

// renderTree draws spans as an indented tree, children in start order,
// with a few attributes each (docs/observability.md shows one).
func renderTree(spans tracetest.SpanStubs, extra map[string][]string) string {
	children := map[string][]tracetest.SpanStub{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanContext.SpanID().String()] = true
	}
	var roots []tracetest.SpanStub
	for _, s := range spans {
		p := s.Parent.SpanID().String()
		if !s.Parent.IsValid() || !ids[p] {
			roots = append(roots, s)
			continue
		}
		children[p] = append(children[p], s)
	}
	show := []string{"gen_ai.conversation.id", "agentkernel.run.stop_reason", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
		"agentkernel.tool.source", "agentkernel.tool.outcome", "agentkernel.policy.effect", "agentkernel.policy.rules",
		"agentkernel.hooks.rewrote", "agentkernel.sandbox.layers", "agentkernel.approval.decision", "agentkernel.approval.by"}
	var b strings.Builder
	var walk func(s tracetest.SpanStub, depth int)
	walk = func(s tracetest.SpanStub, depth int) {
		fmt.Fprintf(&b, "%s%s", strings.Repeat("  ", depth), s.Name)
		if svc := s.Resource.Set(); svc.Len() > 0 {
			if v, ok := svc.Value("service.name"); ok && v.AsString() != "agentkernel" {
				fmt.Fprintf(&b, "  [%s]", v.AsString())
			}
		}
		for _, k := range show {
			if v := spanAttr(s, k); v != "" {
				fmt.Fprintf(&b, "  %s=%s", strings.TrimPrefix(strings.TrimPrefix(k, "agentkernel."), "gen_ai."), v)
			}
		}
		b.WriteByte('\n')
		for _, line := range extra[s.SpanContext.SpanID().String()] {
			fmt.Fprintf(&b, "%s%s\n", strings.Repeat("  ", depth+1), line)
		}
		kids := children[s.SpanContext.SpanID().String()]
		sort.Slice(kids, func(i, j int) bool { return kids[i].StartTime.Before(kids[j].StartTime) })
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	sort.Slice(roots, func(i, j int) bool { return roots[i].StartTime.Before(roots[j].StartTime) })
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}

// TestTraceAcrossPluginsAndMCP: a scripted run that calls a built-in, a
// subprocess plugin and an MCP stdio server, is denied a call and asks for
// an approval, then `kernel approve`: the whole span tree, with the
// plugin's spans (sent back over gRPC) and the MCP server's (exported by
// the server itself from the _meta trace context) in the run's trace.
func TestTraceAcrossPluginsAndMCP(t *testing.T) {
	col := telemetrytest.New(t)
	cfg, _ := traceSetup(t, col, traceScript, "")
	store := t.TempDir()
	exp := tracetest.NewInMemoryExporter()
	_, errOut, err := cliSpans(t, exp, "run", "--config", cfg, "--store", store, "go")
	if err != nil || !strings.Contains(errOut, "awaiting_approval") {
		t.Fatalf("run: want it to stop for an approval: %v\n%s", err, errOut)
	}
	sid := sessionLine.FindStringSubmatch(errOut)[1]
	if _, errOut, err := cliSpans(t, exp, "approve", "--config", cfg, "--store", store, "--yes", sid); err != nil {
		t.Fatalf("approve: %v\n%s", err, errOut)
	}
	spans := exp.GetSpans()
	named := func(name string) []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, s := range spans {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}
	one := func(name string) tracetest.SpanStub {
		t.Helper()
		got := named(name)
		if len(got) != 1 {
			t.Fatalf("want one %q span, have %d; the spans:\n%s", name, len(got), renderTree(spans, nil))
		}
		return got[0]
	}
	parentOf := func(s tracetest.SpanStub) string { return s.Parent.SpanID().String() }
	id := func(s tracetest.SpanStub) string { return s.SpanContext.SpanID().String() }

	runs := named("invoke_agent agentkernel")
	if len(runs) != 2 {
		t.Fatalf("want two invoke_agent spans (run, approve), have %d:\n%s", len(runs), renderTree(spans, nil))
	}
	first, second := runs[0], runs[1]
	if first.StartTime.After(second.StartTime) {
		first, second = second, first
	}
	trace1 := first.SpanContext.TraceID()
	if spanAttr(first, "gen_ai.conversation.id") != sid || spanAttr(first, "agentkernel.run.stop_reason") != "awaiting_approval" ||
		spanAttr(second, "agentkernel.run.stop_reason") != "completed" {
		t.Errorf("run spans: session %q stop %q, then stop %q", spanAttr(first, "gen_ai.conversation.id"),
			spanAttr(first, "agentkernel.run.stop_reason"), spanAttr(second, "agentkernel.run.stop_reason"))
	}
	for _, c := range named("chat m") {
		if parentOf(c) != id(first) && parentOf(c) != id(second) {
			t.Errorf("a chat span is not a child of a run span")
		}
	}
	if n := len(named("chat m")); n != 4 {
		t.Errorf("want four chat spans (three turns, then the answer after approval), have %d", n)
	}

	read := one("execute_tool read_file")
	gitCall := one("execute_tool git.git_log")
	echo := one("execute_tool t.echo")
	for _, c := range []tracetest.SpanStub{read, gitCall, echo} {
		if parentOf(c) != id(first) {
			t.Errorf("%s is not a child of the run", c.Name)
		}
		if spanAttr(c, "agentkernel.tool.outcome") != "ok" || spanAttr(c, "agentkernel.policy.effect") != "allow" {
			t.Errorf("%s: outcome %q effect %q", c.Name, spanAttr(c, "agentkernel.tool.outcome"), spanAttr(c, "agentkernel.policy.effect"))
		}
	}
	for span, want := range map[*tracetest.SpanStub]string{&read: "builtin", &gitCall: "plugin", &echo: "mcp"} {
		if got := spanAttr(*span, "agentkernel.tool.source"); got != want {
			t.Errorf("%s source = %q, want %q", span.Name, got, want)
		}
	}
	if !strings.Contains(spanAttr(read, "agentkernel.hooks.rewrote"), "canary") {
		t.Errorf("the canary hook's rewrite is not on read_file's span: %q", spanAttr(read, "agentkernel.hooks.rewrote"))
	}
	if spanAttr(gitCall, "agentkernel.sandbox.layers") == "" || spanAttr(read, "agentkernel.sandbox.layers") != "os_root" {
		t.Errorf("sandbox layers: git %q, read_file %q", spanAttr(gitCall, "agentkernel.sandbox.layers"), spanAttr(read, "agentkernel.sandbox.layers"))
	}
	notes := named("execute_tool t.write_note")
	if len(notes) != 3 {
		t.Fatalf("want three t.write_note spans (denied, asked, approved), have %d", len(notes))
	}
	sort.Slice(notes, func(i, j int) bool { return notes[i].StartTime.Before(notes[j].StartTime) })
	for i, want := range []struct{ outcome, effect, rules, parent string }{
		{"denied", "deny", "no-notes-about-secrets", id(first)},
		{"awaiting_approval", "ask", "notes-need-approval", id(first)},
		{"ok", "", "", id(second)},
	} {
		n := notes[i]
		if spanAttr(n, "agentkernel.tool.outcome") != want.outcome || spanAttr(n, "agentkernel.policy.effect") != want.effect ||
			spanAttr(n, "agentkernel.policy.rules") != want.rules || parentOf(n) != want.parent {
			t.Errorf("t.write_note %d: outcome %q effect %q rules %q (want %+v)", i, spanAttr(n, "agentkernel.tool.outcome"),
				spanAttr(n, "agentkernel.policy.effect"), spanAttr(n, "agentkernel.policy.rules"), want)
		}
	}
	if notes[0].Status.Code.String() != "Error" {
		t.Errorf("the denied call's span status = %v, want Error", notes[0].Status)
	}
	wait := one("await_approval t.write_note")
	if parentOf(wait) != id(second) || spanAttr(wait, "agentkernel.approval.decision") != "approved" || wait.StartTime.After(second.StartTime) {
		t.Errorf("await_approval: parent ok %v, decision %q, starts at the ask %v", parentOf(wait) == id(second),
			spanAttr(wait, "agentkernel.approval.decision"), !wait.StartTime.After(second.StartTime))
	}

	// The plugin's spans came back with its result: the call's span in the
	// plugin, and the git plugin's own child span, in the run's trace.
	pluginCall := one("git_log")
	gitExec := one("git log")
	if pluginCall.SpanContext.TraceID() != trace1 || parentOf(pluginCall) != id(gitCall) || parentOf(gitExec) != id(pluginCall) {
		t.Errorf("the plugin's spans are not under execute_tool git.git_log in the run's trace:\n%s", renderTree(spans, nil))
	}
	if v, _ := pluginCall.Resource.Set().Value("service.name"); v.AsString() != "agentkernel-plugin-git" {
		t.Errorf("the plugin's spans are exported as service %q", v.AsString())
	}

	// The MCP server exported its span from the _meta trace context.
	mcpSpans := col.Wait(30*time.Second, func(s []telemetrytest.Span) bool { return len(s) >= 2 })
	var echoRemote *telemetrytest.Span
	for i, s := range mcpSpans {
		if s.Name == "tools/call echo" {
			echoRemote = &mcpSpans[i]
		}
	}
	if echoRemote == nil {
		t.Fatalf("the MCP server exported no span for echo: %+v", mcpSpans)
	}
	if echoRemote.TraceID != trace1.String() || echoRemote.ParentID != id(echo) || echoRemote.Service != "mcp-testserver" {
		t.Errorf("the MCP server's span is not a child of execute_tool t.echo in the run's trace: %+v", *echoRemote)
	}

	// No content without the opt-in: the workspace's canary is nowhere.
	for _, s := range spans {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.Emit(), "CANARY") || strings.Contains(kv.Value.Emit(), "sk-live") {
				t.Errorf("span %s exports content without the opt-in: %s", s.Name, kv.Key)
			}
		}
	}
	extra := map[string][]string{id(echo): {"tools/call echo  [mcp-testserver, exported by the server]"}}
	t.Logf("the run's trace:\n%s", renderTree(spans, extra))
}

// TestContentOptInRedactsSecrets: with telemetry.content, arguments and
// results are on the spans, and a credential a tool read reaches the
// exporter redacted by the kernel's scrubber, even with the scrubber off for
// tool results (the model reads the token; the exporter does not). Without
// the opt-in no content is exported.
func TestContentOptInRedactsSecrets(t *testing.T) {
	const token = "ghp_R8x2kQ7mN4pL9vT3wZ6yB1cD5fG0hJ2sA8uE"
	for _, content := range []bool{true, false} {
		t.Run(fmt.Sprint("content=", content), func(t *testing.T) {
			col := telemetrytest.New(t)
			cfg, ws := traceSetup(t, col, "steps:\n  - tool_calls: [{name: read_file, args: {path: keys.txt}}]\n  - text: done\n",
				fmt.Sprintf("telemetry: {content: %v}\n", content))
			os.WriteFile(filepath.Join(ws, "keys.txt"), []byte("github token "+token+"\n"), 0o600)
			b, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(cfg, []byte(strings.Replace(string(b), "hooks:\n", "hooks:\n  scrubber: {enabled: false}\n", 1)), 0o600)
			exp := tracetest.NewInMemoryExporter()
			store := t.TempDir()
			_, errOut, err := cliSpans(t, exp, "run", "--config", cfg, "--store", store, "read my keys")
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			// The model read the token: the hooks did not redact it.
			out, _, err := cli(t, "sessions", "show", "--full", "--store", store, sessionLine.FindStringSubmatch(errOut)[1])
			if err != nil || !strings.Contains(out, token) {
				t.Fatalf("the session does not hold the tool's result verbatim (%v):\n%s", err, out)
			}
			var result string
			for _, s := range exp.GetSpans() {
				if s.Name == "execute_tool read_file" {
					result = spanAttr(s, "gen_ai.tool.call.result")
				}
				for _, kv := range s.Attributes {
					if strings.Contains(kv.Value.Emit(), token) {
						t.Errorf("span %s exports the token: %s", s.Name, kv.Key)
					}
					switch kv.Key {
					case "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result":
						if content {
							break
						}
						t.Errorf("span %s exports content without the opt-in: %s", s.Name, kv.Key)
					}
				}
			}
			if content && !strings.Contains(result, "github token [REDACTED]") {
				t.Fatalf("read_file's result on its span = %q, want the file with the token redacted", result)
			}
		})
	}
}

// TestMetricsEndpoint: kernel run with telemetry.metrics.listen, against
// an OpenAI-compatible server that fails once, serves /metrics while it
// runs. The families are parsed with the Prometheus text parser, every one
// docs/observability.md lists is present, and the counts match the run.
// With tracing on too, the model server gets the chat span as traceparent.
func TestMetricsEndpoint(t *testing.T) {
	root := artifacts(t, "wasm-tools/starlark/starlark.wasm")
	col := telemetrytest.New(t)
	srv := openaitest.NewServer(t,
		openaitest.Error(503, "overloaded"),
		openaitest.Step{Text: "Looking.", Calls: []openaitest.Call{
			{Name: "read_file", Arguments: `{"path":"notes.txt"}`}, {Name: "git.git_log", Arguments: `{"max_count":1}`}, {Name: "t.echo", Arguments: `{"text":"hi"}`}}},
		openaitest.ToolCall("t.write_note", `{"title":"my secret","body":"x"}`),
		openaitest.ToolCall("t.write_note", `{"title":"groceries","body":"milk"}`),
		openaitest.Text("done"),
	)
	t.Setenv("AGENTKERNEL_TEST_KEY", "sk-test-not-a-real-key")
	t.Setenv("AK_METRICS_TOKEN", "metrics-token-for-the-test")
	model := "model: {provider: openai, name: m, base_url: " + srv.URL() + ", api_key_env: AGENTKERNEL_TEST_KEY, fallbacks: [m2], retry: {base_delay: 1ms, max_delay: 1ms}}\n"
	cfg, _ := traceSetupModel(t, col, model, "steps: []\n", "  wasm:\n    - {path: "+filepath.Join(root, "wasm-tools/starlark/starlark.wasm")+", pool: 1}\n"+
		"telemetry: {metrics: {listen: '127.0.0.1:0', token_env: AK_METRICS_TOKEN}, traces: {exporter: otlp, endpoint: "+col.HTTPEndpoint+"}}\n")
	store := t.TempDir()
	env := &cliEnv{stdout: io.Discard, stderr: io.Discard}
	a, k, err := startKernel(context.Background(), &commonFlags{config: stringList{cfg}, store: store}, env, newRenderer(env, true, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	res, err := k.Run(context.Background(), "", "go")
	if err != nil || res.StopReason != "awaiting_approval" {
		t.Fatalf("run = %+v, %v", res, err)
	}
	fams := telemetrytest.Scrape(t, a.tel.MetricsHandler(), "")
	check := func(name string, labels map[string]string, want float64) {
		t.Helper()
		if got := telemetrytest.Value(fams, name, labels); got != want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	check("agentkernel_runs_total", map[string]string{"stop_reason": "awaiting_approval"}, 1)
	check("agentkernel_approvals_pending", nil, 1)
	if res, err = k.Resolve(context.Background(), res.SessionID, true, ""); err != nil || res.StopReason != "completed" {
		t.Fatalf("resolve = %+v, %v", res, err)
	}
	fams = telemetrytest.Scrape(t, a.tel.MetricsHandler(), "")
	for _, name := range documentedFamilies(t) {
		if _, ok := fams[name]; !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	check("agentkernel_runs_total", map[string]string{"stop_reason": "awaiting_approval"}, 1)
	check("agentkernel_runs_total", map[string]string{"stop_reason": "completed"}, 1)
	check("agentkernel_tool_calls_total", map[string]string{"tool": "read_file", "source": "builtin", "outcome": "ok"}, 1)
	check("agentkernel_tool_calls_total", map[string]string{"tool": "git.git_log", "source": "plugin", "outcome": "ok"}, 1)
	check("agentkernel_tool_calls_total", map[string]string{"tool": "t.echo", "source": "mcp", "outcome": "ok"}, 1)
	check("agentkernel_tool_calls_total", map[string]string{"tool": "t.write_note", "source": "mcp", "outcome": "denied"}, 1)
	check("agentkernel_tool_calls_total", map[string]string{"tool": "t.write_note", "source": "mcp", "outcome": "awaiting_approval"}, 1)
	check("agentkernel_tool_calls_total", map[string]string{"tool": "t.write_note", "source": "mcp", "outcome": "ok"}, 1)
	check("agentkernel_tool_call_duration_seconds", map[string]string{"tool": "read_file"}, 1)
	check("agentkernel_policy_decisions_total", map[string]string{"effect": "deny", "rule": "no-notes-about-secrets"}, 1)
	check("agentkernel_policy_decisions_total", map[string]string{"effect": "ask", "rule": "notes-need-approval"}, 1)
	check("agentkernel_model_generations_total", map[string]string{"model": "m", "result": "ok"}, 4)
	check("agentkernel_model_retries_total", map[string]string{"model": "m", "class": "503"}, 1)
	check("agentkernel_model_time_to_first_token_seconds", map[string]string{"model": "m"}, 2)
	check("agentkernel_approvals_pending", nil, 0)
	check("agentkernel_approval_wait_seconds", map[string]string{"decision": "approved"}, 1)
	check("agentkernel_wasm_pool_size", map[string]string{"module": "starlark"}, 1)
	check("gen_ai_client_operation_duration_seconds", map[string]string{"gen_ai_request_model": "m"}, 4)
	check("gen_ai_client_token_usage", map[string]string{"gen_ai_token_type": "output"}, 4)
	if v := telemetrytest.Value(fams, "agentkernel_store_commit_duration_seconds", nil); v < 6 {
		t.Errorf("store commits = %v, want one per step (at least 6)", v)
	}
	if v := telemetrytest.Value(fams, "agentkernel_sandbox_starts_total", nil); v < 2 {
		t.Errorf("sandbox starts = %v, want the plugin and the MCP server at least", v)
	}
	if v := telemetrytest.Value(fams, "agentkernel_model_tokens_total", map[string]string{"model": "m", "type": "input"}); v <= 0 {
		t.Errorf("input tokens = %v", v)
	}

	// The listener serves the same families over HTTP, to the token only.
	resp, err := http.Get("http://" + a.metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("GET the metrics listener: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the metrics listener answered %d to a request without its token", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", "http://"+a.metricsAddr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer metrics-token-for-the-test")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatalf("GET the metrics listener: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "agentkernel_runs_total") {
		t.Fatalf("the metrics listener answered %d:\n%s", resp.StatusCode, body)
	}

	// Every request to the model server carried its chat span's context.
	a.Close()
	spans := col.Wait(30*time.Second, func(s []telemetrytest.Span) bool {
		n := 0
		for _, x := range s {
			if x.Name == "chat m" {
				n++
			}
		}
		return n >= 4
	})
	chats := map[string]bool{}
	for _, x := range spans {
		if x.Name == "chat m" {
			chats[x.TraceID+"-"+x.SpanID] = true
		}
	}
	tpRE := regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-01$`)
	for i, r := range srv.Requests() {
		m := tpRE.FindStringSubmatch(r.Header.Get("traceparent"))
		if m == nil || !chats[m[1]+"-"+m[2]] {
			t.Errorf("request %d to the model server: traceparent %q is not a chat span's (have %v)", i, r.Header.Get("traceparent"), chats)
		}
	}
}

// documentedFamilies are the families docs/observability.md lists.
func documentedFamilies(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?m)^\\| `((?:agentkernel|gen_ai)_[a-z_]+)`").FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	if len(out) < 20 {
		t.Fatalf("docs/observability.md lists %d families; is the table there?", len(out))
	}
	return out
}

// TestTracingFromStandardVariables: OTEL_TRACES_EXPORTER=otlp and an
// endpoint turn tracing on for kernel run (OTLP/HTTP, then gRPC), chat,
// serve and mcp serve, with no other change: their spans reach a collector
// on loopback.
func TestTracingFromStandardVariables(t *testing.T) {
	col := telemetrytest.New(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	count := func(service, name string) int {
		n := 0
		for _, s := range col.Spans() {
			if s.Service == service && s.Name == name {
				n++
			}
		}
		return n
	}
	wait := func(t *testing.T, service, name string, want int) {
		t.Helper()
		col.Wait(30*time.Second, func([]telemetrytest.Span) bool { return count(service, name) >= want })
		if got := count(service, name); got < want {
			t.Fatalf("%d %q spans of service %s reached the collector, want %d", got, name, service, want)
		}
	}

	t.Run("run over http", func(t *testing.T) {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.HTTPEndpoint)
		t.Setenv("OTEL_SERVICE_NAME", "run-http")
		if _, errOut, err := cli(t, "run", "--config", demoConfig, "--store", t.TempDir(), "What does this project do?"); err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		wait(t, "run-http", "invoke_agent agentkernel", 1)
		wait(t, "run-http", "execute_tool read_file", 1)
	})
	t.Run("run over grpc", func(t *testing.T) {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.GRPCEndpoint)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
		t.Setenv("OTEL_SERVICE_NAME", "run-grpc")
		if _, errOut, err := cli(t, "run", "--config", demoConfig, "--store", t.TempDir(), "What does this project do?"); err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		wait(t, "run-grpc", "invoke_agent agentkernel", 1)
	})
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.HTTPEndpoint)
	t.Run("chat", func(t *testing.T) {
		t.Setenv("OTEL_SERVICE_NAME", "chat")
		var out, errb bytes.Buffer
		in := "What does this project do?\n/quit\n"
		if err := run(t.Context(), []string{"chat", "--config", demoConfig, "--store", t.TempDir()}, strings.NewReader(in), &out, &errb); err != nil {
			t.Fatalf("%v\n%s", err, errb.String())
		}
		wait(t, "chat", "invoke_agent agentkernel", 1)
	})
	t.Run("mcp serve", func(t *testing.T) {
		t.Setenv("OTEL_SERVICE_NAME", "mcp-serve")
		cfg, _ := mcpSetup(t, "steps: [{text: x}]\n")
		cs, stop := serveStdio(t, cfg, t.TempDir(), nil)
		if text, isErr := callText(t, cs, "read_file", map[string]any{"path": "creds.txt"}); isErr {
			t.Fatalf("read_file: %s", text)
		}
		stop()
		wait(t, "mcp-serve", "execute_tool read_file", 1)
	})
	t.Run("serve", func(t *testing.T) {
		t.Setenv("OTEL_SERVICE_NAME", "serve")
		dir := t.TempDir()
		keys := filepath.Join(dir, "keys.json")
		secret, errOut, err := cli(t, "keys", "create", "ci", "--scopes", "run,read,metrics", "--keys", keys)
		if err != nil {
			t.Fatalf("keys: %v\n%s", err, errOut)
		}
		secret = strings.TrimSpace(secret)
		other, _, err := cli(t, "keys", "create", "runner", "--scopes", "run,read", "--keys", keys)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "metrics.yaml"), []byte("telemetry: {metrics: {enabled: true}}\n"), 0o600)
		ctx, cancel := context.WithCancel(t.Context())
		var errb testutil.SyncBuffer
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"serve", "--config", demoConfig, "--config", filepath.Join(dir, "metrics.yaml"), "--store", filepath.Join(dir, "store"),
				"--keys", keys, "--listen", "127.0.0.1:0", "--access-log", ""}, strings.NewReader(""), io.Discard, &errb)
		}()
		var base string
		for deadline := time.Now().Add(60 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if m := regexp.MustCompile(`listening on (http://[0-9.:]+)`).FindStringSubmatch(errb.String()); m != nil {
				base = m[1]
			}
		}
		if base == "" {
			cancel()
			t.Fatalf("kernel serve did not start:\n%s", errb.String())
		}
		do := func(method, path, body, key string) (int, string) {
			req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		code, body := do("POST", "/v1/sessions", `{}`, secret)
		var sess struct{ ID string }
		if code != 201 || json.Unmarshal([]byte(body), &sess) != nil {
			t.Fatalf("create session: %d %s", code, body)
		}
		if code, body := do("POST", "/v1/sessions/"+sess.ID+"/runs", `{"prompt":"What does this project do?"}`, secret); code != 202 {
			t.Fatalf("start run: %d %s", code, body)
		}
		// /metrics: a key with the metrics scope reads it once the run ended.
		deadline := time.Now().Add(60 * time.Second)
		for {
			code, body := do("GET", "/metrics", "", secret)
			if code == 200 && strings.Contains(body, `agentkernel_runs_total{stop_reason="completed"} 1`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("/metrics never counted the run: %d\n%s", code, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if code, _ := do("GET", "/metrics", "", "aks_not-a-key"); code != 401 {
			t.Errorf("/metrics with an unknown key: %d, want 401", code)
		}
		if code, _ := do("GET", "/metrics", "", strings.TrimSpace(other)); code != 403 {
			t.Errorf("/metrics with a key without the metrics scope: %d, want 403", code)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("serve: %v\n%s", err, errb.String())
		}
		wait(t, "serve", "invoke_agent agentkernel", 1)
	})
}

// TestTraceParentToCommands: with telemetry.traces.command_env,
// run_command's program gets TRACEPARENT, the call's span; without it the
// variable is not there. Logs in JSON carry the trace and span ids.
func TestTraceParentToCommands(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("command_env=", on), func(t *testing.T) {
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, "ws"), 0o700)
			script := "steps:\n  - tool_calls:\n      - name: run_command\n        args: {argv: [sh, -c, 'echo \"tp=$TRACEPARENT\"']}\n  - text: done\n"
			os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(script), 0o600)
			os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte("name: p\nrevision: \"1\"\ndefaults: {tool_call: allow}\n"), 0o600)
			cfg := "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: ws\npolicy: {file: policy.yaml}\ntools:\n  builtin:\n    enable: [run_command]\n" +
				fmt.Sprintf("telemetry: {logs: json, traces: {command_env: %v}}\n", on)
			os.WriteFile(filepath.Join(dir, "kernel.yaml"), []byte(cfg), 0o600)
			exp := tracetest.NewInMemoryExporter()
			store := t.TempDir()
			_, errOut, err := cliSpans(t, exp, "run", "--config", filepath.Join(dir, "kernel.yaml"), "--store", store, "--log-level", "debug", "go")
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			var call tracetest.SpanStub
			for _, s := range exp.GetSpans() {
				if s.Name == "execute_tool run_command" {
					call = s
				}
			}
			want := "00-" + call.SpanContext.TraceID().String() + "-" + call.SpanContext.SpanID().String() + "-01"
			out, _, err := cli(t, "sessions", "show", "--full", "--store", store, sessionLine.FindStringSubmatch(errOut)[1])
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(out, "tp="+want); got != on {
				t.Errorf("the program saw TRACEPARENT=%s: %v, want %v:\n%s", want, got, on, out)
			}
			if !strings.Contains(out, "tp=") {
				t.Errorf("the command did not run:\n%s", out)
			}
			// The JSON log's record of the call carries its ids.
			found := false
			for _, line := range strings.Split(errOut, "\n") {
				var rec map[string]any
				if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "tool call ended" {
					continue
				}
				found = rec["trace_id"] == call.SpanContext.TraceID().String() && rec["span_id"] == call.SpanContext.SpanID().String()
			}
			if !found {
				t.Errorf("no JSON log record of the call with its trace and span ids:\n%s", errOut)
			}
		})
	}
}
