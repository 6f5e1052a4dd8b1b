package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/anthropic"
	"github.com/agentkernel/agentkernel/kernel/provider/openai"
	"github.com/agentkernel/agentkernel/plugins/builtin"
	"github.com/agentkernel/agentkernel/plugins/mcp"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/serve"
	"github.com/agentkernel/agentkernel/telemetry"
)

// startTelemetry builds the telemetry that telemetry: and the standard
// OTEL_* variables ask for (docs/observability.md), before the tools load:
// the plugin host and run_command take their tracing from it. Off, it is
// nil and nothing else changes. exporter, when set, receives the spans
// instead (the tests' in-memory exporter).
func (a *app) startTelemetry(ctx context.Context, exporter sdktrace.SpanExporter) error {
	tc := a.cfg.Telemetry
	tc.Scrub = a.redact // the credential scrubber once the hooks load; nothing verbatim before
	tc.SpanExporter = exporter
	tc.Console = a.stderr
	tc.Tools = a.tools
	tc.Version = buildVersion().Version
	tc.Provider, tc.ServerAddress = providerName(a.cfg.Model)
	tc.Models = append([]string{a.cfg.Model.Name}, a.cfg.Model.Fallbacks...)
	tc.Layers = a.layersInForce()
	tc.Stats = a.telemetryStats
	tel, err := telemetry.New(ctx, tc)
	if err != nil {
		return fmt.Errorf("%s: telemetry: %w", a.cfg.source(), err)
	}
	if tel.LogsJSON() {
		h := telemetry.NewLogHandler(a.stderr, telemetry.SlogLevel(a.log.GetLevel()), a.redact)
		a.log = telemetry.HCLogger(h, "kernel", a.log.GetLevel())
		tel.SetLogger(slog.New(h))
	}
	if !tel.Enabled() {
		return nil
	}
	a.tel = tel
	a.closers = append(a.closers, func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			a.log.Warn("telemetry: spans not exported", "error", err)
		}
		return nil
	})
	return nil
}

// providerName is gen_ai.provider.name and the model server's base URL.
func providerName(m ModelConfig) (name, base string) {
	switch m.Provider {
	case "", openai.Name:
		base = m.BaseURL
		if base == "" {
			base = openai.DefaultBaseURL
		}
		return openai.Name, base
	case anthropic.Name:
		base = m.BaseURL
		if base == "" {
			base = anthropic.DefaultBaseURL
		}
		return anthropic.Name, base
	}
	return m.Provider, ""
}

// instrument wires the telemetry into a kernel's configuration: the
// observer, the outermost hook and the provider's wrapper. Without
// telemetry it changes nothing.
func (a *app) instrument(kc *kernel.Config) {
	if a.tel == nil {
		return
	}
	kc.Observe = a.tel.Observe
	kc.Hooks = append([]kernel.Hook{a.tel.Hook}, kc.Hooks...)
	kc.Provider = a.tel.Provider(kc.Provider)
}

// httpClient is the model provider's HTTP client: traced requests carry
// traceparent. Nil (the provider's own) without tracing.
func (a *app) httpClient() *http.Client {
	if a.tel == nil || !a.tel.TracesOn() {
		return nil
	}
	return &http.Client{Transport: a.tel.Transport(http.DefaultTransport)}
}

// onSpans hands a plugin's spans to the exporter (nil without tracing).
func (a *app) onSpans() func(context.Context, string, []byte) {
	if a.tel == nil || !a.tel.TracesOn() {
		return nil
	}
	return func(ctx context.Context, plugin string, spans []byte) {
		if err := a.tel.ImportSpans(ctx, plugin, spans); err != nil {
			a.log.Warn("telemetry: plugin spans", "plugin", plugin, "error", err)
		}
	}
}

// commandTraceParent says whether run_command gets TRACEPARENT.
func (a *app) commandTraceParent() bool { return a.tel != nil && a.tel.CommandEnv() }

// telemetryStats are the numbers no event carries.
func (a *app) telemetryStats() telemetry.Stats {
	c := sandbox.Counters()
	s := telemetry.Stats{SandboxStarts: c.Starts, SandboxDenials: c.Denials, SandboxLimitHits: c.LimitHits}
	if a.wasm != nil {
		for _, p := range a.wasm.PoolStats() {
			s.WASMPools = append(s.WASMPools, telemetry.WASMPool{Module: p.Module, Size: p.Size, Ready: p.Ready, Hits: p.Hits, Waits: p.Misses})
		}
	}
	return s
}

// layersInForce returns, for the tool spans, the confinement each tool
// runs under: the sandbox layers a native process gets on this machine
// (what its grant needs and the machine has), "wasm" for a WASM module,
// "os_root" for the in-process built-ins.
func (a *app) layersInForce() func(name, source string) []string {
	var (
		mu    sync.Mutex
		cache = map[string][]string{}
	)
	native := func(g sandbox.Grant) []string {
		rep := sandbox.Check()
		var out []string
		for _, l := range g.Needs() {
			if rep.Has(l) {
				out = append(out, string(l))
			}
		}
		return out
	}
	return func(name, source string) []string {
		key := source
		if name == builtin.NameRunCommand {
			key = name
		}
		mu.Lock()
		defer mu.Unlock()
		if l, ok := cache[key]; ok {
			return l
		}
		var out []string
		kind, rest, _ := strings.Cut(source, ":")
		switch {
		case key == builtin.NameRunCommand:
			out = native(builtin.CommandGrant(a.cfg.path(a.cfg.Workspace), a.cfg.Tools.Builtin))
		case kind == "subprocess":
			if pcs, err := a.cfg.pluginConfigs(); err == nil {
				for _, pc := range pcs {
					if pc.Name == rest {
						if eff, _, err := subprocess.EffectiveConfig(pc); err == nil {
							pc = eff
						}
						out = native(subprocess.PluginGrant(pc, pc.Path, ""))
					}
				}
			}
		case kind == "mcp":
			if scs, err := a.cfg.mcpConfigs(); err == nil {
				for _, sc := range scs {
					if sc.Name == rest && len(sc.Command) > 0 {
						if g, err := mcp.StdioGrant(sc, a.cfg.Sandbox.AllowMissing); err == nil {
							out = native(g)
						}
					}
				}
			}
		case kind == "wasm":
			out = []string{"wasm"}
		case kind == builtin.Source || kind == "":
			out = []string{"os_root"}
		}
		cache[key] = out
		return out
	}
}

// serveMetrics serves telemetry.metrics.listen until ctx ends; its
// goroutine belongs to the app (Close stops and waits for it).
func (a *app) serveMetrics(ctx context.Context, stderr io.Writer) error {
	if a.tel == nil || a.tel.MetricsListen() == "" {
		return nil
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- a.tel.ServeMetrics(ctx, func(addr string) { ready <- addr }) }()
	select {
	case addr := <-ready:
		a.metricsAddr = addr
		fmt.Fprintf(stderr, "kernel: metrics on http://%s/metrics\n", addr)
	case err := <-done:
		cancel()
		return err
	}
	a.closers = append(a.closers, func() error {
		cancel()
		return <-done
	})
	return nil
}

// mountMetrics serves /metrics on kernel serve's API listener to keys
// with the metrics scope.
func (a *app) mountMetrics(srv *serve.Server, ks *serve.KeyStore) {
	if a.tel == nil || !a.tel.MetricsOn() {
		return
	}
	h := a.tel.MetricsHandler()
	srv.Mount("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		k, known := ks.Authenticate(strings.TrimSpace(tok))
		switch {
		case !ok || !known:
			w.Header().Set("WWW-Authenticate", `Bearer realm="kernel"`)
			http.Error(w, "unauthorized: /metrics needs an API key with the metrics scope (kernel keys create prometheus --scopes metrics)", http.StatusUnauthorized)
		case !k.Has(serve.ScopeMetrics):
			http.Error(w, fmt.Sprintf("forbidden: key %q lacks the metrics scope", k.Name), http.StatusForbidden)
		default:
			h.ServeHTTP(w, r)
		}
	}))
}
