package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentkernel/agentkernel/kernel"
)

// SchemaURL is the semantic conventions version the spans and metrics
// follow: the GenAI conventions of semantic-conventions v1.41.0.
const SchemaURL = semconv.SchemaURL

// scopeName is the instrumentation scope of the kernel's spans and metrics.
const scopeName = "github.com/agentkernel/agentkernel/telemetry"

// Telemetry turns the kernel's runs into OpenTelemetry traces and
// Prometheus metrics. It is wired in from outside the kernel: Observe is
// the kernel's Config.Observe, Hook the outermost hook, Provider wraps the
// model provider and Transport the provider's HTTP client. Safe for
// concurrent use.
type Telemetry struct {
	cfg    resolved
	tp     *sdktrace.TracerProvider // nil when traces are off
	procs  []sdktrace.SpanProcessor // tp's, for spans imported from plugins
	tracer trace.Tracer
	res    *resource.Resource
	prop   propagation.TextMapPropagator
	m      *metrics // nil when metrics are off
	server serverAttrs
	pend   *approvals
}

// New builds the telemetry cfg and the environment ask for. It starts
// nothing when both traces and metrics are off: check Enabled, and wire
// nothing then, so that telemetry that is off costs nothing.
func New(ctx context.Context, cfg Config) (*Telemetry, error) {
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	t := &Telemetry{cfg: r, prop: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		tracer: noop.NewTracerProvider().Tracer(scopeName), pend: newApprovals()}
	t.server = parseServer(r.ServerAddress)
	if !r.tracesOn && !r.metricsOn {
		return t, nil
	}
	t.res, err = resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(r.ServiceName), semconv.ServiceVersion(r.Version)))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	if r.tracesOn {
		exp := r.SpanExporter
		if exp == nil {
			if exp, err = newExporter(ctx, r); err != nil {
				return nil, err
			}
		}
		bsp := sdktrace.NewBatchSpanProcessor(exp)
		t.procs = []sdktrace.SpanProcessor{bsp}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithResource(t.res), sdktrace.WithSpanProcessor(bsp))
		t.tracer = t.tp.Tracer(scopeName, trace.WithSchemaURL(semconv.SchemaURL))
	}
	if r.metricsOn {
		if t.m, err = newMetrics(t); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// newExporter builds the exporter OTEL_TRACES_EXPORTER (or the
// configuration) names. The OTLP exporters read their own variables
// (endpoint, headers, timeout, compression, certificates).
func newExporter(ctx context.Context, r resolved) (sdktrace.SpanExporter, error) {
	if r.exporter == "console" {
		w := r.Console
		if w == nil {
			w = os.Stderr
		}
		return stdouttrace.New(stdouttrace.WithWriter(w))
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	if r.protocol == "grpc" {
		var opts []otlptracegrpc.Option
		if r.endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(r.endpoint))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	} else {
		var opts []otlptracehttp.Option
		if r.endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(r.endpoint+"/v1/traces"))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter (%s): %w", r.protocol, err)
	}
	return exp, nil
}

// Enabled reports whether traces or metrics are on. When it is false the
// program should wire nothing in.
func (t *Telemetry) Enabled() bool { return t.TracesOn() || t.MetricsOn() }

// TracesOn reports whether spans are recorded.
func (t *Telemetry) TracesOn() bool { return t.tp != nil }

// MetricsOn reports whether metrics are kept.
func (t *Telemetry) MetricsOn() bool { return t.m != nil }

// ContentOn reports whether content is recorded (after the scrubber).
func (t *Telemetry) ContentOn() bool { return t.cfg.Content }

// CommandEnv reports whether native commands get TRACEPARENT.
func (t *Telemetry) CommandEnv() bool { return t.TracesOn() && t.cfg.Traces.CommandEnv }

// LogsJSON reports whether logs are JSON records.
func (t *Telemetry) LogsJSON() bool { return t.cfg.logsJSON }

// MetricsListen is the address of the metrics listener, empty for none.
func (t *Telemetry) MetricsListen() string { return t.cfg.Metrics.Listen }

// SetLogger sets Config.Logger: call it while wiring, before the first run.
func (t *Telemetry) SetLogger(l *slog.Logger) { t.cfg.Logger = l }

// Propagator is the W3C trace context and baggage propagator.
func (t *Telemetry) Propagator() propagation.TextMapPropagator { return t.prop }

// Flush exports the spans buffered so far; ctx bounds the wait.
func (t *Telemetry) Flush(ctx context.Context) error {
	if t.tp == nil {
		return nil
	}
	return t.tp.ForceFlush(ctx)
}

// Shutdown exports the spans still buffered and stops the exporters; ctx
// bounds the wait.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.m != nil {
		errs = append(errs, t.m.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// spec returns the registered spec of the named tool.
func (t *Telemetry) spec(name string) (kernel.ToolSpec, bool) {
	if t.cfg.Tools == nil {
		return kernel.ToolSpec{}, false
	}
	return t.cfg.Tools.Spec(name)
}

// scrub redacts s for a content attribute.
func (t *Telemetry) scrub(s string) string {
	if t.cfg.Scrub == nil {
		return ""
	}
	return t.cfg.Scrub(s)
}

// serverAttrs are server.address and server.port of the model server.
type serverAttrs []attribute.KeyValue

func parseServer(base string) serverAttrs {
	if base == "" {
		return nil
	}
	u, err := url.Parse(base)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	out := serverAttrs{semconv.ServerAddress(u.Hostname())}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if p, err := strconv.Atoi(port); err == nil {
		out = append(out, semconv.ServerPort(p))
	}
	return out
}

var _ kernel.ObserveFunc = (*Telemetry)(nil).Observe
