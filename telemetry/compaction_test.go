package telemetry_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/telemetry"
	"github.com/agentkernel/agentkernel/telemetry/telemetrytest"
)

// longProvider reads a big file per turn for turns turns, then answers;
// asked to compact (the summariser's prompt), it summarises. It counts its
// own turns: a summary leaves fewer in the request.
type longProvider struct {
	turns int
	mu    sync.Mutex
	n     int
}

func (p *longProvider) Stream(_ context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	for _, m := range req.Messages {
		if strings.Contains(m.Content, "You compact the history") {
			return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, Content: "Summary: files 1.. were read."}, Model: "summariser-1",
				Usage: kernel.Usage{InputTokens: 900, OutputTokens: 12}, FinishReason: "stop"}, nil
		}
	}
	p.mu.Lock()
	turn := p.n
	p.n++
	p.mu.Unlock()
	if turn < p.turns {
		return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, ToolCalls: []kernel.ToolCall{
			{ID: "c" + strconv.Itoa(turn), Name: "read_big", Arguments: `{}`}}}, Usage: kernel.Usage{InputTokens: 100, OutputTokens: 5}}, nil
	}
	emit(kernel.Delta{Text: "done"})
	return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, Content: "done"}, Usage: kernel.Usage{InputTokens: 100, OutputTokens: 1}}, nil
}

// TestCompactionSpan: a run whose history outgrows the window is compacted
// by a summary; the compaction is a compact_context span under the run,
// with its kind and token counts, and the summariser's model call is a
// chat span under it.
func TestCompactionSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	reg := kernel.NewRegistry()
	big := strings.Repeat("lorem ipsum dolor sit amet ", 20)
	if err := reg.Register(kernel.NewTool(kernel.ToolSpec{Name: "read_big", Description: "read", Schema: json.RawMessage(`{"type":"object"}`), Tier: kernel.TierReadOnly, Source: "builtin"},
		func(context.Context, json.RawMessage) (kernel.Result, error) { return kernel.Result{Content: big}, nil })); err != nil {
		t.Fatal(err)
	}
	tel, err := telemetry.New(context.Background(), telemetry.Config{SpanExporter: exp, Metrics: telemetry.MetricsConfig{Enabled: true},
		Provider: "openai", Tools: reg, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	var compactions []kernel.ContextCompacted
	prov := &longProvider{turns: 12}
	k, err := kernel.New(kernel.Config{Provider: tel.Provider(prov), Store: memory.New(), Model: "m1", Tools: reg, MaxTurns: 20,
		ContextWindow: 4096, Hooks: []kernel.Hook{tel.Hook}, Observe: tel.Observe,
		OnEvent: func(e kernel.Event) {
			if c, ok := e.(kernel.ContextCompacted); ok {
				compactions = append(compactions, c)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(context.Background(), "", "read them all")
	if err != nil || res.StopReason != kernel.StopCompleted {
		t.Fatalf("run = %+v, %v", res, err)
	}
	summarised := 0
	for _, c := range compactions {
		if c.Kind == "summarised" {
			summarised++
		}
	}
	if summarised == 0 {
		t.Fatalf("the run was not compacted by a summary: %+v", compactions)
	}
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	run := one(t, spans, "invoke_agent agentkernel")
	cs := byName(spans, "compact_context")
	if len(cs) != len(compactions) {
		t.Fatalf("%d compact_context spans, want one per compaction (%d)", len(cs), len(compactions))
	}
	var summary tracetest.SpanStub
	for _, c := range cs {
		if c.Parent.SpanID() != run.SpanContext.SpanID() {
			t.Errorf("compact_context is not a child of the run")
		}
		if v, _ := attr(c, "agentkernel.compaction.kind"); v.AsString() == "summarised" {
			summary = c
		}
	}
	if v, _ := attr(summary, "agentkernel.compaction.tokens_before"); v.AsInt64() <= 0 {
		t.Errorf("the summary's compaction has no tokens_before: %v", summary.Attributes)
	}
	if v, _ := attr(summary, "gen_ai.usage.input_tokens"); v.AsInt64() != 900 {
		t.Errorf("the summary's compaction: summariser input tokens %d, want 900", v.AsInt64())
	}
	children := 0
	for _, s := range spans {
		if s.Parent.SpanID() == summary.SpanContext.SpanID() {
			children++
			if !strings.HasPrefix(s.Name, "chat ") {
				t.Errorf("compact_context has a child %s, want the summariser's chat span", s.Name)
			}
			if v, _ := attr(s, "gen_ai.response.model"); v.AsString() != "summariser-1" {
				t.Errorf("the summariser's chat span: response model %q", v.AsString())
			}
		}
	}
	if children != 1 {
		t.Errorf("compact_context has %d children, want the summariser's chat span", children)
	}
	// Its tokens count with the model's.
	fams := telemetrytest.Scrape(t, tel.MetricsHandler(), "")
	if v := telemetrytest.Value(fams, "agentkernel_model_tokens_total", map[string]string{"model": "summariser-1", "type": "input"}); v < 900 {
		t.Errorf("the summariser's input tokens in the metrics = %v, want at least 900", v)
	}

	// A forced compaction (`kernel compact`, chat's /compact), outside any
	// run, is a trace of its own: compact_context, the summariser's chat
	// under it.
	exp.Reset()
	compactions = nil
	prov.mu.Lock()
	prov.n, prov.turns = 0, 3
	prov.mu.Unlock()
	short, err := k.Run(context.Background(), "", "read a few")
	if err != nil || len(compactions) != 0 {
		t.Fatalf("a short run: %v, %d compactions", err, len(compactions))
	}
	tel.Flush(context.Background())
	exp.Reset()
	rec, err := k.Compact(context.Background(), short.SessionID)
	if err != nil || rec == nil || rec.Summarised == 0 {
		t.Fatalf("Compact = %+v, %v", rec, err)
	}
	tel.Flush(context.Background())
	spans = exp.GetSpans()
	forced := one(t, spans, "compact_context")
	if forced.Parent.IsValid() {
		t.Errorf("the forced compaction's span has a parent: %v", forced.Parent)
	}
	if v, _ := attr(forced, "agentkernel.compaction.kind"); v.AsString() != "summarised" {
		t.Errorf("the forced compaction's kind = %q", v.AsString())
	}
	if c := one(t, spans, "chat m1"); c.Parent.SpanID() != forced.SpanContext.SpanID() {
		t.Errorf("the summariser's chat span is not under the forced compaction")
	}
	if n := len(byName(spans, "invoke_agent agentkernel")); n != 0 {
		t.Errorf("a forced compaction made %d run spans", n)
	}
}

// TestSemconvOptIn: by default the spans carry the v1.36 gen_ai.system as
// well as gen_ai.provider.name; OTEL_SEMCONV_STABILITY_OPT_IN with
// gen_ai_latest_experimental (in a list) leaves only the latest names.
func TestSemconvOptIn(t *testing.T) {
	for _, tc := range []struct {
		optIn  string
		system bool
	}{{"", true}, {"http, gen_ai_latest_experimental", false}, {"http", true}} {
		exp := tracetest.NewInMemoryExporter()
		tel, err := telemetry.New(context.Background(), telemetry.Config{SpanExporter: exp, Provider: "openai",
			Getenv: func(k string) string {
				if k == "OTEL_SEMCONV_STABILITY_OPT_IN" {
					return tc.optIn
				}
				return ""
			}})
		if err != nil {
			t.Fatal(err)
		}
		k, err := kernel.New(kernel.Config{Provider: tel.Provider(&longProvider{turns: 0}), Store: memory.New(), Model: "m1",
			Hooks: []kernel.Hook{tel.Hook}, Observe: tel.Observe})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Run(context.Background(), "", "hi"); err != nil {
			t.Fatal(err)
		}
		tel.Flush(context.Background())
		chat := one(t, exp.GetSpans(), "chat m1")
		if v, _ := attr(chat, "gen_ai.provider.name"); v.AsString() != "openai" {
			t.Errorf("opt-in %q: gen_ai.provider.name = %q, want openai", tc.optIn, v.AsString())
		}
		if v, ok := attr(chat, "gen_ai.system"); ok != tc.system || (ok && v.AsString() != "openai") {
			t.Errorf("opt-in %q: gen_ai.system present %v (%q), want %v", tc.optIn, ok, v.AsString(), tc.system)
		}
		tel.Shutdown(context.Background())
	}
}
