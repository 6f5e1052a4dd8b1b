package telemetry_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/telemetry"
	"github.com/agentkernel/agentkernel/telemetry/telemetrytest"
)

// policy denies "rm", asks for "deploy", allows the rest.
type policy struct{}

func (policy) Surface(_ context.Context, _ *kernel.State, tools []kernel.ToolSpec) []kernel.ToolSpec {
	return tools
}

func (policy) Decide(_ context.Context, _ *kernel.State, c *kernel.Call) kernel.Decision {
	switch c.Tool().Name {
	case "rm":
		return kernel.Decision{ID: "d1", Effect: kernel.EffectDeny, Rules: []string{"no-rm"}, Message: "no"}
	case "deploy":
		return kernel.Decision{ID: "d2", Effect: kernel.EffectAsk, Rules: []string{"deploys-need-approval"}, Message: "deploy?"}
	}
	return kernel.Decision{ID: "d0", Effect: kernel.EffectAllow, Default: true}
}

func (policy) Budget(context.Context, *kernel.State, kernel.BudgetPhase) kernel.BudgetVerdict {
	return kernel.BudgetVerdict{}
}

// secretRE is the test's scrubber.
var secretRE = regexp.MustCompile(`sk-[a-z0-9]+`)

func scrub(s string) string { return secretRE.ReplaceAllString(s, "[REDACTED]") }

type fixture struct {
	tel   *telemetry.Telemetry
	exp   *tracetest.InMemoryExporter
	k     *kernel.Kernel
	model *kerneltest.Provider
}

func newFixture(t *testing.T, content bool, replies ...kerneltest.Reply) *fixture {
	t.Helper()
	return newPointsFixture(t, content, kernel.Points{}, replies...)
}

// newPointsFixture is newFixture with hooks at the lifecycle points.
func newPointsFixture(t *testing.T, content bool, points kernel.Points, replies ...kerneltest.Reply) *fixture {
	t.Helper()
	f := &fixture{exp: tracetest.NewInMemoryExporter(), model: kerneltest.NewProvider(replies...)}
	reg := kernel.NewRegistry()
	secret := kernel.NewTool(kernel.ToolSpec{Name: "env", Description: "show env", Schema: json.RawMessage(`{"type":"object"}`), Tier: kernel.TierReadOnly, Source: "builtin"},
		func(context.Context, json.RawMessage) (kernel.Result, error) {
			return kernel.Result{Content: "token=sk-abc123"}, nil
		})
	side := func(name string) kernel.Tool {
		return kernel.NewTool(kernel.ToolSpec{Name: name, Description: name, Schema: json.RawMessage(`{"type":"object"}`), Tier: kernel.TierSideEffecting, Source: "mcp:ops"},
			func(context.Context, json.RawMessage) (kernel.Result, error) {
				return kernel.Result{Content: name + " done"}, nil
			})
	}
	if err := reg.Register(secret, side("rm"), side("deploy")); err != nil {
		t.Fatal(err)
	}
	var err error
	f.tel, err = telemetry.New(context.Background(), telemetry.Config{
		SpanExporter: f.exp, Metrics: telemetry.MetricsConfig{Enabled: true}, Content: content, Scrub: scrub,
		Provider: "openai", Tools: reg, Getenv: func(string) string { return "" },
		Layers: func(name, source string) []string { return []string{"landlock"} },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.k, err = kernel.New(kernel.Config{Provider: f.tel.Provider(f.model), Store: memory.New(), Model: "m1", Tools: reg, Policy: policy{},
		Hooks: []kernel.Hook{f.tel.Hook}, Observe: f.tel.Observe, Prices: map[string]kernel.Price{"m1": {InputPerMTok: 1, OutputPerMTok: 2}},
		Points: points})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// spans flushes and returns the recorded spans.
func (f *fixture) spans(t *testing.T) tracetest.SpanStubs {
	t.Helper()
	if err := f.tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f.exp.GetSpans()
}

func attr(s tracetest.SpanStub, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func byName(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func one(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	got := byName(spans, name)
	if len(got) != 1 {
		var names []string
		for _, s := range spans {
			names = append(names, s.Name)
		}
		t.Fatalf("want one span %q, have %d among %v", name, len(got), names)
	}
	return got[0]
}

// TestSpanTree: a run that reads a tool, is denied one call and asked to
// approve another, then resumed, is two traces of invoke_agent spans with
// their chat and execute_tool children, the policy on the tool spans, and
// the approval's wait linked to the run that asked.
func TestSpanTree(t *testing.T) {
	f := newFixture(t, false,
		kerneltest.Reply{Calls: kerneltest.Calls("env", `{}`, "rm", `{}`).Calls, Usage: kernel.Usage{InputTokens: 10, OutputTokens: 5}},
		kerneltest.Calls("deploy", `{}`),
		kerneltest.Text("all done"))
	ctx := context.Background()
	res, err := f.k.Run(ctx, "", "go")
	if err != nil || res.StopReason != kernel.StopAwaitingApproval {
		t.Fatalf("run = %+v, %v", res, err)
	}
	if res, err = f.k.With(kernel.RunOptions{Principal: "alice"}).Resolve(ctx, res.SessionID, true, ""); err != nil || res.StopReason != kernel.StopCompleted {
		t.Fatalf("resolve = %+v, %v", res, err)
	}
	spans := f.spans(t)
	runs := byName(spans, "invoke_agent agentkernel")
	if len(runs) != 2 {
		t.Fatalf("want two invoke_agent spans, have %d", len(runs))
	}
	first, second := runs[0], runs[1]
	if v, _ := attr(first, "gen_ai.conversation.id"); v.AsString() != res.SessionID {
		t.Errorf("run span's gen_ai.conversation.id = %q, want the session %s", v.AsString(), res.SessionID)
	}
	if v, _ := attr(first, "agentkernel.run.stop_reason"); v.AsString() != "awaiting_approval" {
		t.Errorf("first run's stop reason = %q", v.AsString())
	}
	if v, _ := attr(second, "agentkernel.principal"); v.AsString() != "alice" {
		t.Errorf("the resumed run's principal = %q, want alice", v.AsString())
	}
	parent := func(s tracetest.SpanStub) tracetest.SpanStub {
		for _, p := range spans {
			if p.SpanContext.SpanID() == s.Parent.SpanID() {
				return p
			}
		}
		t.Fatalf("span %s has no recorded parent", s.Name)
		return tracetest.SpanStub{}
	}
	chats := byName(spans, "chat m1")
	if len(chats) != 3 {
		t.Fatalf("want three chat spans (one per generation), have %d", len(chats))
	}
	for _, c := range chats {
		if c.SpanKind != trace.SpanKindClient {
			t.Errorf("chat span kind = %v, want client", c.SpanKind)
		}
		if p := parent(c); !strings.HasPrefix(p.Name, "invoke_agent") {
			t.Errorf("chat span's parent is %s, want the run", p.Name)
		}
	}
	if v, _ := attr(chats[0], "gen_ai.usage.input_tokens"); v.AsInt64() != 10 {
		t.Errorf("first chat's input tokens = %d, want 10", v.AsInt64())
	}
	if v, _ := attr(chats[0], "gen_ai.response.finish_reasons"); len(v.AsStringSlice()) != 1 || v.AsStringSlice()[0] != "tool_calls" {
		t.Errorf("first chat's finish reasons = %v", v.AsStringSlice())
	}
	env := one(t, spans, "execute_tool env")
	if parent(env).SpanContext.SpanID() != first.SpanContext.SpanID() {
		t.Errorf("execute_tool env is not a child of the first run")
	}
	for key, want := range map[string]string{"gen_ai.tool.call.id": "c1", "agentkernel.tool.source": "builtin", "agentkernel.tool.outcome": "ok",
		"agentkernel.policy.effect": "allow", "agentkernel.tool.tier": "read_only"} {
		if v, _ := attr(env, key); v.AsString() != want {
			t.Errorf("execute_tool env %s = %q, want %q", key, v.AsString(), want)
		}
	}
	if v, _ := attr(env, "agentkernel.sandbox.layers"); len(v.AsStringSlice()) != 1 {
		t.Errorf("execute_tool env has no sandbox layers: %v", v)
	}
	rm := one(t, spans, "execute_tool rm")
	if v, _ := attr(rm, "agentkernel.policy.rules"); len(v.AsStringSlice()) != 1 || v.AsStringSlice()[0] != "no-rm" {
		t.Errorf("denied call's rules = %v", v.AsStringSlice())
	}
	if v, _ := attr(rm, "agentkernel.tool.outcome"); v.AsString() != "denied" || rm.Status.Code.String() != "Error" {
		t.Errorf("denied call: outcome %q, status %v", v.AsString(), rm.Status)
	}
	deploys := byName(spans, "execute_tool deploy")
	if len(deploys) != 2 {
		t.Fatalf("want two deploy spans (asked, then run once approved), have %d", len(deploys))
	}
	if v, _ := attr(deploys[0], "agentkernel.tool.outcome"); v.AsString() != "awaiting_approval" {
		t.Errorf("first deploy outcome = %q", v.AsString())
	}
	if v, _ := attr(deploys[1], "agentkernel.tool.outcome"); v.AsString() != "ok" || parent(deploys[1]).SpanContext.SpanID() != second.SpanContext.SpanID() {
		t.Errorf("approved deploy: outcome %q, or not under the resumed run", v.AsString())
	}
	wait := one(t, spans, "await_approval deploy")
	if parent(wait).SpanContext.SpanID() != second.SpanContext.SpanID() {
		t.Errorf("the approval's span is not under the run that resumed")
	}
	if v, _ := attr(wait, "agentkernel.approval.decision"); v.AsString() != "approved" {
		t.Errorf("approval decision = %q", v.AsString())
	}
	if len(wait.Links) != 1 || wait.Links[0].SpanContext.TraceID() != first.SpanContext.TraceID() {
		t.Errorf("the approval's span does not link to the run that asked: %v", wait.Links)
	}
	// No content without the opt-in.
	for _, s := range spans {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.Emit(), "sk-abc123") || strings.Contains(kv.Value.Emit(), "token=") || kv.Key == "gen_ai.input.messages" {
				t.Errorf("span %s carries content without the opt-in: %s=%s", s.Name, kv.Key, kv.Value.Emit())
			}
		}
	}
}

// TestContentOptIn: with content on, the prompt, arguments, results and
// answers are on the spans, and a secret in a tool result reaches the
// exporter redacted.
func TestContentOptIn(t *testing.T) {
	f := newFixture(t, true, kerneltest.Calls("env", `{"key":"sk-abc123"}`), kerneltest.Text("the token is sk-abc123"))
	if _, err := f.k.Run(context.Background(), "", "show sk-abc123 please"); err != nil {
		t.Fatal(err)
	}
	spans := f.spans(t)
	env := one(t, spans, "execute_tool env")
	if v, ok := attr(env, "gen_ai.tool.call.result"); !ok || v.AsString() != "token=[REDACTED]" {
		t.Errorf("tool result = %q (present %v), want it redacted", v.AsString(), ok)
	}
	if v, _ := attr(env, "gen_ai.tool.call.arguments"); !strings.Contains(v.AsString(), "[REDACTED]") {
		t.Errorf("tool arguments = %q, want redacted", v.AsString())
	}
	run := one(t, spans, "invoke_agent agentkernel")
	if v, _ := attr(run, "gen_ai.input.messages"); !strings.Contains(v.AsString(), "show [REDACTED] please") {
		t.Errorf("run input = %q", v.AsString())
	}
	if v, _ := attr(run, "gen_ai.output.messages"); !strings.Contains(v.AsString(), "the token is [REDACTED]") {
		t.Errorf("run output = %q", v.AsString())
	}
	for _, s := range spans {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.Emit(), "sk-abc123") {
				t.Errorf("span %s exports the secret: %s", s.Name, kv.Key)
			}
		}
	}
}

// TestContentNeedsTheScrubber: content is never exported unscrubbed.
func TestContentNeedsTheScrubber(t *testing.T) {
	_, err := telemetry.New(context.Background(), telemetry.Config{Content: true, Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "scrubber") {
		t.Fatalf("content without a scrubber: err = %v", err)
	}
}

// TestMetricsScrape: /metrics parses with the Prometheus text parser and
// its counts match the run.
func TestMetricsScrape(t *testing.T) {
	f := newFixture(t, false,
		kerneltest.Reply{Calls: kerneltest.Calls("env", `{}`, "rm", `{}`).Calls, Usage: kernel.Usage{InputTokens: 10, OutputTokens: 5}},
		kerneltest.Text("done"))
	if _, err := f.k.Run(context.Background(), "", "go"); err != nil {
		t.Fatal(err)
	}
	fams := telemetrytest.Scrape(t, f.tel.MetricsHandler(), "")
	value := func(name string, labels map[string]string) float64 { return telemetrytest.Value(fams, name, labels) }
	if v := value("agentkernel_runs_total", map[string]string{"stop_reason": "completed"}); v != 1 {
		t.Errorf("runs completed = %v, want 1", v)
	}
	if v := value("agentkernel_tool_calls_total", map[string]string{"tool": "rm", "outcome": "denied", "source": "mcp"}); v != 1 {
		t.Errorf("rm denied = %v, want 1", v)
	}
	if v := value("agentkernel_policy_decisions_total", map[string]string{"effect": "deny", "rule": "no-rm"}); v != 1 {
		t.Errorf("deny decisions = %v, want 1", v)
	}
	if v := value("agentkernel_model_tokens_total", map[string]string{"model": "m1", "type": "input"}); v != 10 {
		t.Errorf("input tokens = %v, want 10", v)
	}
	if v := value("agentkernel_model_generations_total", map[string]string{"model": "m1", "result": "ok"}); v != 2 {
		t.Errorf("generations = %v, want 2", v)
	}
	if v := value("gen_ai_client_token_usage", map[string]string{"gen_ai_token_type": "input"}); v != 2 {
		t.Errorf("gen_ai.client.token.usage input samples = %v, want 2", v)
	}
	if v := value("gen_ai_client_operation_duration_seconds", nil); v != 2 {
		t.Errorf("gen_ai.client.operation.duration samples = %v, want 2", v)
	}
	if v := value("agentkernel_store_commit_duration_seconds", nil); v < 3 {
		t.Errorf("store commits = %v, want at least 3", v)
	}
}

// TestOffIsNothing: without configuration or variables, telemetry is off.
func TestOffIsNothing(t *testing.T) {
	tel, err := telemetry.New(context.Background(), telemetry.Config{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Enabled() || tel.MetricsHandler() != nil {
		t.Fatal("telemetry is on without being asked")
	}
}

// TestStandardVariables: the standard variables turn tracing on, pick the
// protocol, and bad values are errors naming the variable.
func TestStandardVariables(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		traces  bool
		metrics bool
		err     string
	}{
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, traces: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, traces: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{env: map[string]string{"OTEL_METRICS_EXPORTER": "prometheus"}, metrics: true},
		{env: map[string]string{"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_PROMETHEUS_HOST": "0.0.0.0"}, err: "not a loopback"},
		{env: map[string]string{"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_PROMETHEUS_PORT": "0"}, err: "needs a bearer token"},
	} {
		tel, err := telemetry.New(context.Background(), telemetry.Config{Getenv: func(k string) string { return tc.env[k] }})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err = %v, want %q", tc.env, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.env, err)
			continue
		}
		if tel.TracesOn() != tc.traces || tel.MetricsOn() != tc.metrics {
			t.Errorf("%v: traces %v metrics %v, want %v %v", tc.env, tel.TracesOn(), tel.MetricsOn(), tc.traces, tc.metrics)
		}
		_ = tel.Shutdown(context.Background())
	}
}
