package telemetry

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/sandbox"
)

// namespace prefixes every Prometheus family of the kernel's own.
const namespace = "agentkernel"

// metrics are the Prometheus families, and the GenAI metrics of the
// conventions through an OpenTelemetry meter whose reader is the same
// registry. docs/observability.md lists every family and its labels.
type metrics struct {
	reg *prometheus.Registry
	mp  *sdkmetric.MeterProvider

	runs         *prometheus.CounterVec
	runDuration  *prometheus.HistogramVec
	generations  *prometheus.CounterVec
	retries      *prometheus.CounterVec
	fallbacks    *prometheus.CounterVec
	ttft         *prometheus.HistogramVec
	genDuration  *prometheus.HistogramVec
	tokens       *prometheus.CounterVec
	cost         *prometheus.CounterVec
	toolCalls    *prometheus.CounterVec
	toolDuration *prometheus.HistogramVec
	decisions    *prometheus.CounterVec
	approvalWait *prometheus.HistogramVec
	hookRuns     *prometheus.CounterVec
	hookDuration *prometheus.HistogramVec
	storeCommit  prometheus.Histogram
	storeErrors  prometheus.Counter

	models sync.Map // model name → *modelMetrics
	tools  sync.Map // tool and source → *toolMetrics

	tokenUsage genaiconv.ClientTokenUsage
	opDuration genaiconv.ClientOperationDuration
	provider   genaiconv.ProviderNameAttr
}

// Buckets: model calls and runs take seconds to minutes, tools and store
// writes milliseconds to seconds.
var (
	slowBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320}
	fastBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120}
)

func newMetrics(t *Telemetry) (*metrics, error) {
	reg := prometheus.NewRegistry()
	m := &metrics{reg: reg, provider: genaiconv.ProviderNameAttr(firstNonEmpty(t.cfg.Provider, "_OTHER"))}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
		reg.MustRegister(c)
		return c
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
		reg.MustRegister(h)
		return h
	}
	m.runs = counter("runs_total", "Runs ended, by stop reason.", "stop_reason")
	m.runDuration = histogram("run_duration_seconds", "Run duration, by stop reason.", slowBuckets, "stop_reason")
	m.generations = counter("model_generations_total", "Model generations (one per answer, retries included), by model and result (ok, error).", "model", "result")
	m.retries = counter("model_retries_total", "Model calls tried again, by model and failure class (an HTTP status such as 429, or stream_cut, stream_idle, connection, empty_response).", "model", "class")
	m.fallbacks = counter("model_fallbacks_total", "Generations handed to a fallback model, by the model that failed and the fallback.", "model", "fallback")
	m.ttft = histogram("model_time_to_first_token_seconds", "Time from a model call to its first streamed fragment, by model.", slowBuckets, "model")
	m.genDuration = histogram("model_generation_duration_seconds", "Generation duration, retries included, by model.", slowBuckets, "model")
	m.tokens = counter("model_tokens_total", "Tokens, by model and type (input, output, cached_input, cache_write_input, reasoning).", "model", "type")
	m.cost = counter("model_cost_usd_total", "Cost in US dollars at the configured prices, by model.", "model")
	m.toolCalls = counter("tool_calls_total", "Tool calls, by tool, source (builtin, plugin, wasm, mcp) and outcome.", "tool", "source", "outcome")
	m.toolDuration = histogram("tool_call_duration_seconds", "Tool call duration through the whole pipeline, by tool and source.", fastBuckets, "tool", "source")
	m.decisions = counter("policy_decisions_total", "Policy decisions, by effect and matched rule (\"(default)\" when none matched).", "effect", "rule")
	m.approvalWait = histogram("approval_wait_seconds", "Time from an approval request to its decision, by decision (approved, rejected, expired).", slowBuckets, "decision")
	m.hookRuns = counter("hook_runs_total", "Hook decisions, by hook point (run_start, before_compact, before_model, after_model, before, after, run_end) and outcome (allowed, blocked, changed, failed; a tool call's hooks count only their blocks, changes and failures).", "point", "outcome")
	m.hookDuration = histogram("hook_duration_seconds", "How long a hook at a lifecycle point took, by point.", fastBuckets, "point")
	m.storeCommit = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "store_commit_duration_seconds", Help: "Store writes of one step (Store.Commit).", Buckets: fastBuckets})
	m.storeErrors = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "store_commit_errors_total", Help: "Store writes that failed."})
	reg.MustRegister(m.storeCommit, m.storeErrors, &scrapeCollector{t: t},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// Zeros for the closed sets, so that every family is there from the
	// start and rate() sees the first increase.
	for _, r := range kernel.StopReasons() { // budget stops add their own
		m.runs.WithLabelValues(string(r))
	}
	for _, e := range kernel.Effects() {
		m.decisions.WithLabelValues(string(e), "(default)")
	}
	for _, d := range []string{"approved", "rejected", "expired"} {
		m.approvalWait.WithLabelValues(d)
	}
	for _, p := range kernel.HookPoints() {
		for _, o := range []string{"allowed", "blocked", "changed", "failed"} {
			if p.Lifecycle() || o != "allowed" {
				m.hookRuns.WithLabelValues(string(p), o)
			}
		}
		if p.Lifecycle() {
			m.hookDuration.WithLabelValues(string(p))
		}
	}
	for i, model := range t.cfg.Models {
		for _, r := range []string{"ok", "error"} {
			m.generations.WithLabelValues(model, r)
		}
		m.cost.WithLabelValues(model)
		if i+1 < len(t.cfg.Models) {
			m.fallbacks.WithLabelValues(model, t.cfg.Models[i+1])
		}
	}

	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	m.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(t.res))
	meter := m.mp.Meter(scopeName)
	if m.tokenUsage, err = genaiconv.NewClientTokenUsage(meter); err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", m.tokenUsage.Name(), err)
	}
	if m.opDuration, err = genaiconv.NewClientOperationDuration(meter); err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", m.opDuration.Name(), err)
	}
	return m, nil
}

// modelMetrics are one model's series, resolved once: a label lookup
// hashes its values every time.
type modelMetrics struct {
	genOK                                    prometheus.Counter
	genDur, ttft                             prometheus.Observer
	tokIn, tokOut, tokCached, tokWrite, tokR prometheus.Counter
	cost                                     prometheus.Counter
	// in, out and op are the GenAI metrics' attribute sets.
	in, out, op attribute.Set
}

func (m *metrics) model(name string) *modelMetrics {
	if mm, ok := m.models.Load(name); ok {
		return mm.(*modelMetrics)
	}
	base := []attribute.KeyValue{semconv.GenAIOperationNameKey.String(string(genaiconv.OperationNameChat)),
		semconv.GenAIProviderNameKey.String(string(m.provider)), semconv.GenAIRequestModel(name), semconv.GenAIResponseModel(name)}
	mm := &modelMetrics{
		genOK: m.generations.WithLabelValues(name, "ok"), genDur: m.genDuration.WithLabelValues(name), ttft: m.ttft.WithLabelValues(name),
		tokIn: m.tokens.WithLabelValues(name, "input"), tokOut: m.tokens.WithLabelValues(name, "output"),
		tokCached: m.tokens.WithLabelValues(name, "cached_input"), tokR: m.tokens.WithLabelValues(name, "reasoning"),
		tokWrite: m.tokens.WithLabelValues(name, "cache_write_input"),
		cost:     m.cost.WithLabelValues(name),
		in:       attribute.NewSet(append(base, semconv.GenAITokenTypeKey.String(string(genaiconv.TokenTypeInput)))...),
		out:      attribute.NewSet(append(base, semconv.GenAITokenTypeKey.String(string(genaiconv.TokenTypeOutput)))...),
		op:       attribute.NewSet(base...),
	}
	got, _ := m.models.LoadOrStore(name, mm)
	return got.(*modelMetrics)
}

// generation counts a generation that answered.
func (m *metrics) generation(g *genSpan, model string, u kernel.Usage, cost float64) {
	mm := m.model(g.model)
	mm.genOK.Inc()
	d := time.Since(g.start).Seconds()
	mm.genDur.Observe(d)
	if g.ttft > 0 {
		mm.ttft.Observe(g.ttft.Seconds())
	}
	m.account(model, u, cost)
	ctx := context.Background()
	if model == g.model {
		m.opDuration.RecordSet(ctx, d, mm.op)
		m.tokenUsage.RecordSet(ctx, u.InputTokens, mm.in)
		m.tokenUsage.RecordSet(ctx, u.OutputTokens, mm.out)
		return
	}
	req, resp := semconv.GenAIRequestModel(g.model), semconv.GenAIResponseModel(model) // a fallback answered
	m.opDuration.Record(ctx, d, genaiconv.OperationNameChat, m.provider, req, resp)
	m.tokenUsage.Record(ctx, u.InputTokens, genaiconv.OperationNameChat, m.provider, genaiconv.TokenTypeInput, req, resp)
	m.tokenUsage.Record(ctx, u.OutputTokens, genaiconv.OperationNameChat, m.provider, genaiconv.TokenTypeOutput, req, resp)
}

// account adds usage and cost.
func (m *metrics) account(model string, u kernel.Usage, cost float64) {
	mm := m.model(model)
	mm.tokIn.Add(float64(u.InputTokens))
	mm.tokOut.Add(float64(u.OutputTokens))
	if u.CachedInputTokens > 0 {
		mm.tokCached.Add(float64(u.CachedInputTokens))
	}
	if u.CacheWriteTokens > 0 {
		mm.tokWrite.Add(float64(u.CacheWriteTokens))
	}
	if u.ReasoningTokens > 0 {
		mm.tokR.Add(float64(u.ReasoningTokens))
	}
	mm.cost.Add(cost)
}

// toolMetrics are one tool's series (of one source), resolved once.
type toolMetrics struct {
	duration prometheus.Observer
	outcomes sync.Map // kernel.Outcome → prometheus.Counter
}

// tool counts a finished call.
func (m *metrics) tool(name, source string, outcome kernel.Outcome, d time.Duration) {
	key := name + "\x00" + source
	v, ok := m.tools.Load(key)
	if !ok {
		v, _ = m.tools.LoadOrStore(key, &toolMetrics{duration: m.toolDuration.WithLabelValues(name, source)})
	}
	tm := v.(*toolMetrics)
	c, ok := tm.outcomes.Load(outcome)
	if !ok {
		c, _ = tm.outcomes.LoadOrStore(outcome, m.toolCalls.WithLabelValues(name, source, string(outcome)))
	}
	c.(prometheus.Counter).Inc()
	tm.duration.Observe(d.Seconds())
}

// decision counts a policy decision once per matched rule.
func (m *metrics) decision(d kernel.Decision) {
	if len(d.Rules) == 0 {
		m.decisions.WithLabelValues(string(d.Effect), "(default)").Inc()
		return
	}
	for _, r := range d.Rules {
		m.decisions.WithLabelValues(string(d.Effect), r).Inc()
	}
}

// scrapeCollector reads, at each scrape, what no event carries: approvals
// pending and their age, the sandbox's counters and the WASM pools.
type scrapeCollector struct{ t *Telemetry }

var (
	descPending      = prometheus.NewDesc(namespace+"_approvals_pending", "Approvals this process asked for and that are not decided yet.", nil, nil)
	descPendingAge   = prometheus.NewDesc(namespace+"_approval_oldest_pending_seconds", "Age of the oldest approval pending (0 when none is).", nil, nil)
	descSandboxStart = prometheus.NewDesc(namespace+"_sandbox_starts_total", "Confined native processes started (tools, plugins, MCP servers, hooks).", nil, nil)
	descSandboxDeny  = prometheus.NewDesc(namespace+"_sandbox_denials_total", "Native processes refused because a sandbox layer they need is missing, by layer.", []string{"layer"}, nil)
	descSandboxLimit = prometheus.NewDesc(namespace+"_sandbox_limit_hits_total", "Confined processes stopped by a limit of their grant, by limit.", []string{"limit"}, nil)
	descPoolSize     = prometheus.NewDesc(namespace+"_wasm_pool_size", "Configured size of a WASM module's pool of ready instances.", []string{"module"}, nil)
	descPoolReady    = prometheus.NewDesc(namespace+"_wasm_pool_ready", "Instances of a WASM module ready now.", []string{"module"}, nil)
	descPoolHits     = prometheus.NewDesc(namespace+"_wasm_pool_hits_total", "WASM calls served by a ready instance.", []string{"module"}, nil)
	descPoolWaits    = prometheus.NewDesc(namespace+"_wasm_pool_waits_total", "WASM calls that found no ready instance and waited for one to be instantiated.", []string{"module"}, nil)
)

// sandboxLimits are the limits' label values always shown (the
// LimitError's Limit); the layers' are sandbox.Layers().
var sandboxLimits = []string{"cpu", "memory_mb", "max_procs", "max_file_mb", "timeout"}

// sandboxLayers are the layers' label values always shown.
var sandboxLayers = func() []string {
	var out []string
	for _, l := range sandbox.Layers() {
		out = append(out, string(l))
	}
	return out
}()

func (c *scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPending, descPendingAge, descSandboxStart, descSandboxDeny, descSandboxLimit, descPoolSize, descPoolReady, descPoolHits, descPoolWaits} {
		ch <- d
	}
}

func (c *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	n, oldest := c.t.pend.snapshot()
	ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(n))
	age := 0.0
	if !oldest.IsZero() {
		age = time.Since(oldest).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(descPendingAge, prometheus.GaugeValue, age)
	var s Stats
	if f := c.t.cfg.Stats; f != nil {
		s = f()
	}
	ch <- prometheus.MustNewConstMetric(descSandboxStart, prometheus.CounterValue, float64(s.SandboxStarts))
	for _, l := range withKeys(sandboxLayers, s.SandboxDenials) {
		ch <- prometheus.MustNewConstMetric(descSandboxDeny, prometheus.CounterValue, float64(s.SandboxDenials[l]), l)
	}
	for _, l := range withKeys(sandboxLimits, s.SandboxLimitHits) {
		ch <- prometheus.MustNewConstMetric(descSandboxLimit, prometheus.CounterValue, float64(s.SandboxLimitHits[l]), l)
	}
	for _, p := range s.WASMPools {
		ch <- prometheus.MustNewConstMetric(descPoolSize, prometheus.GaugeValue, float64(p.Size), p.Module)
		ch <- prometheus.MustNewConstMetric(descPoolReady, prometheus.GaugeValue, float64(p.Ready), p.Module)
		ch <- prometheus.MustNewConstMetric(descPoolHits, prometheus.CounterValue, float64(p.Hits), p.Module)
		ch <- prometheus.MustNewConstMetric(descPoolWaits, prometheus.CounterValue, float64(p.Waits), p.Module)
	}
}

// withKeys is known plus the keys of m it lacks, in order.
func withKeys(known []string, m map[string]int64) []string {
	out := append([]string(nil), known...)
	var extra []string
	for k := range m {
		found := false
		for _, x := range known {
			found = found || x == k
		}
		if !found {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	return append(out, extra...)
}

// approvals are the approvals this process asked for and has not seen
// decided: the gauge's numbers, and the asking run's span for the link
// from the decision's span.
type approvals struct {
	mu sync.Mutex
	m  map[string]asker
}

type asker struct {
	created time.Time
	span    trace.SpanContext
}

func newApprovals() *approvals { return &approvals{m: map[string]asker{}} }

func (a *approvals) add(id string, created time.Time, sc trace.SpanContext) {
	if created.IsZero() {
		created = time.Now()
	}
	a.mu.Lock()
	a.m[id] = asker{created: created, span: sc}
	a.mu.Unlock()
}

func (a *approvals) remove(id string) (asker, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	x, ok := a.m[id]
	delete(a.m, id)
	return x, ok
}

func (a *approvals) snapshot() (n int, oldest time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, x := range a.m {
		if oldest.IsZero() || x.created.Before(oldest) {
			oldest = x.created
		}
	}
	return len(a.m), oldest
}
