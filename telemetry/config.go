package telemetry

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentkernel/agentkernel/kernel"
)

// Config configures Telemetry. The zero value is off: no traces, no
// metrics, nothing captured. The standard OpenTelemetry environment
// variables turn parts on and win over the fields (see Resolve). A Config
// must not be modified after New.
type Config struct {
	// ServiceName is the service.name resource attribute (default
	// "agentkernel"; OTEL_SERVICE_NAME wins).
	ServiceName string `yaml:"service_name,omitempty" json:"service_name,omitempty"`
	// AgentName is gen_ai.agent.name on the run spans (default
	// "agentkernel").
	AgentName string `yaml:"agent_name,omitempty" json:"agent_name,omitempty"`
	// Traces says where spans go.
	Traces TracesConfig `yaml:"traces,omitempty" json:"traces,omitzero"`
	// Metrics says whether metrics are kept and where they are served.
	Metrics MetricsConfig `yaml:"metrics,omitempty" json:"metrics,omitzero"`
	// Content records prompts, tool arguments, tool results and answers on
	// the spans, after the scrubber (Scrub). Off by default;
	// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true turns it on.
	Content bool `yaml:"content,omitempty" json:"content,omitempty"`
	// Logs selects the log format: "text" (the default) or "json"
	// (log/slog JSON records carrying trace_id and span_id).
	Logs string `yaml:"logs,omitempty" json:"logs,omitempty"`

	// The fields below are set by the program, not by configuration.

	// Scrub redacts credentials in every content attribute (the kernel's
	// scrubber). Content is never exported without it: with Content set
	// and Scrub nil, New fails.
	Scrub func(string) string `yaml:"-" json:"-"`
	// Getenv reads the environment (default os.Getenv).
	Getenv func(string) string `yaml:"-" json:"-"`
	// SpanExporter, when set, receives the spans instead of the exporter
	// the environment names (tests, embedding programs); tracing is on.
	SpanExporter sdktrace.SpanExporter `yaml:"-" json:"-"`
	// Console is where OTEL_TRACES_EXPORTER=console writes (default
	// standard error: standard output is the answer's).
	Console io.Writer `yaml:"-" json:"-"`
	// Provider names the model provider (gen_ai.provider.name): "openai",
	// or the configured provider's name.
	Provider string `yaml:"-" json:"-"`
	// Models are the configured model and its fallbacks, in order: their
	// series start at zero.
	Models []string `yaml:"-" json:"-"`
	// ServerAddress is the model server's base URL, for server.address and
	// server.port; empty for an in-process provider.
	ServerAddress string `yaml:"-" json:"-"`
	// Layers returns the sandbox layers in force for a tool (by name and
	// source), for the tool spans; nil records none.
	Layers func(name, source string) []string `yaml:"-" json:"-"`
	// Stats is read at each scrape for the numbers events do not carry:
	// the sandbox's and the WASM pools'. Nil exports zeros.
	Stats func() Stats `yaml:"-" json:"-"`
	// Tools is the kernel's registry: the tool spans name each tool's
	// source, tier and description from it. Nil records the name only.
	Tools *kernel.Registry `yaml:"-" json:"-"`
	// Logger, when set, gets a debug record for each tool call and run as
	// it ends, with the trace and span ids (through NewLogHandler).
	Logger *slog.Logger `yaml:"-" json:"-"`
	// Version is service.version.
	Version string `yaml:"-" json:"-"`
}

// TracesConfig says where spans go. Tracing is on when Exporter is set (or
// OTEL_TRACES_EXPORTER is), or an OTLP endpoint is.
type TracesConfig struct {
	// Exporter is "otlp", "console" or "none" (OTEL_TRACES_EXPORTER wins).
	Exporter string `yaml:"exporter,omitempty" json:"exporter,omitempty"`
	// Endpoint is the OTLP endpoint, e.g. http://127.0.0.1:4318
	// (OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
	// win).
	Endpoint string `yaml:"endpoint,omitempty" json:"endpoint,omitempty"`
	// Protocol is "http/protobuf" (the default) or "grpc"
	// (OTEL_EXPORTER_OTLP_PROTOCOL and OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
	// win).
	Protocol string `yaml:"protocol,omitempty" json:"protocol,omitempty"`
	// CommandEnv passes the call's trace context to native commands
	// (run_command) as TRACEPARENT in their environment. Off by default:
	// the command sees one more variable.
	CommandEnv bool `yaml:"command_env,omitempty" json:"command_env,omitempty"`
}

// MetricsConfig says whether metrics are kept and where they are served.
type MetricsConfig struct {
	// Enabled keeps the metrics: `kernel serve` then serves them on its
	// API listener at /metrics (a key with the metrics scope reads them).
	// OTEL_METRICS_EXPORTER=prometheus turns them on too.
	Enabled bool `yaml:"enabled,omitempty" json:"enabled,omitempty"`
	// Listen, when set, serves /metrics on a listener of its own, for
	// `kernel run` and `kernel chat` as for `kernel serve`: a loopback
	// address (host:port). Setting it turns metrics on.
	// OTEL_EXPORTER_PROMETHEUS_HOST and _PORT set it too.
	Listen string `yaml:"listen,omitempty" json:"listen,omitempty"`
	// TokenEnv names an environment variable holding the bearer token
	// the listener requires (Authorization: Bearer TOKEN); a listener
	// without one is refused (other users of the host reach loopback).
	TokenEnv string `yaml:"token_env,omitempty" json:"token_env,omitempty"`
}

// Stats are the numbers read at each scrape.
type Stats struct {
	// SandboxStarts counts confined processes started; SandboxDenials the
	// ones refused for a missing layer, by layer; SandboxLimitHits the
	// ones a limit stopped, by limit.
	SandboxStarts    int64
	SandboxDenials   map[string]int64
	SandboxLimitHits map[string]int64
	// WASMPools are the modules' instance pools.
	WASMPools []WASMPool
}

// WASMPool is one WASM module's pool of ready instances.
type WASMPool struct {
	Module string
	// Size is the configured size, Ready the instances ready now.
	Size, Ready int
	// Hits are calls served by a ready instance; Waits the calls that
	// found none and waited for one to be instantiated.
	Hits, Waits int64
}

// resolved is a Config with the environment applied.
type resolved struct {
	Config
	tracesOn bool
	exporter string // otlp, console, or "" with SpanExporter
	protocol string // grpc or http/protobuf
	// endpoint is the configured endpoint when no variable names one (the
	// exporters read the variables themselves).
	endpoint     string
	metricsOn    bool
	latestSemcov bool // OTEL_SEMCONV_STABILITY_OPT_IN has gen_ai_latest_experimental
	logsJSON     bool
}

// resolve applies the environment to c: the standard variables win over
// the configuration. It fails on values it does not know.
func (c Config) resolve() (resolved, error) {
	env := c.Getenv
	if env == nil {
		env = os.Getenv
	}
	r := resolved{Config: c}
	if v := env("OTEL_SERVICE_NAME"); v != "" {
		r.ServiceName = v
	}
	if r.ServiceName == "" {
		r.ServiceName = "agentkernel"
	}
	if r.AgentName == "" {
		r.AgentName = "agentkernel"
	}
	if b, _ := strconv.ParseBool(env("OTEL_SDK_DISABLED")); b {
		return resolved{Config: Config{ServiceName: r.ServiceName, AgentName: r.AgentName}}, nil
	}
	for _, v := range strings.Split(env("OTEL_SEMCONV_STABILITY_OPT_IN"), ",") {
		if strings.TrimSpace(v) == "gen_ai_latest_experimental" {
			r.latestSemcov = true
		}
	}
	if v := env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return r, fmt.Errorf("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=%q: want true or false", v)
		}
		r.Content = b
	}
	if r.Content && r.Scrub == nil {
		return r, fmt.Errorf("telemetry.content needs the scrubber: content is never exported unscrubbed")
	}

	// Traces.
	exp := strings.TrimSpace(env("OTEL_TRACES_EXPORTER"))
	if exp == "" {
		exp = r.Traces.Exporter
	}
	envEndpoint := firstNonEmpty(env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), env("OTEL_EXPORTER_OTLP_ENDPOINT"))
	if envEndpoint == "" {
		r.endpoint = r.Traces.Endpoint
	}
	if exp == "" && (envEndpoint != "" || r.endpoint != "") {
		exp = "otlp"
	}
	switch exp {
	case "", "none":
		exp = ""
	case "otlp", "console":
	default:
		return r, fmt.Errorf("OTEL_TRACES_EXPORTER (telemetry.traces.exporter) %q: want otlp, console or none", exp)
	}
	r.exporter = exp
	r.tracesOn = exp != "" || r.SpanExporter != nil
	r.protocol = firstNonEmpty(env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), env("OTEL_EXPORTER_OTLP_PROTOCOL"), r.Traces.Protocol, "http/protobuf")
	switch r.protocol {
	case "grpc", "http/protobuf":
	default:
		return r, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL (telemetry.traces.protocol) %q: want grpc or http/protobuf", r.protocol)
	}

	// Metrics.
	switch v := strings.TrimSpace(env("OTEL_METRICS_EXPORTER")); v {
	case "", "none":
	case "prometheus":
		r.Metrics.Enabled = true
		host, port := env("OTEL_EXPORTER_PROMETHEUS_HOST"), env("OTEL_EXPORTER_PROMETHEUS_PORT")
		if host != "" || port != "" {
			r.Metrics.Listen = net.JoinHostPort(firstNonEmpty(host, "localhost"), firstNonEmpty(port, "9464"))
		}
	default:
		return r, fmt.Errorf("OTEL_METRICS_EXPORTER %q: want prometheus or none (the GenAI metrics are served with the others on /metrics)", v)
	}
	if r.Metrics.Listen != "" {
		r.Metrics.Enabled = true
		if err := checkLoopback(r.Metrics.Listen); err != nil {
			return r, err
		}
	}
	if r.Metrics.Listen != "" && r.Metrics.TokenEnv == "" {
		// Loopback is not a boundary between the users of one host: the
		// numbers name tools, rules and tenants' activity.
		return r, fmt.Errorf("telemetry.metrics.listen %s needs a bearer token: set telemetry.metrics.token_env to a variable holding one (Prometheus sends it with authorization: {credentials_file: …})", r.Metrics.Listen)
	}
	if r.Metrics.TokenEnv != "" && env(r.Metrics.TokenEnv) == "" {
		return r, fmt.Errorf("telemetry.metrics.token_env: the variable %s is not set", r.Metrics.TokenEnv)
	}
	r.metricsOn = r.Metrics.Enabled

	switch r.Logs {
	case "", "text":
	case "json":
		r.logsJSON = true
	default:
		return r, fmt.Errorf("telemetry.logs %q: want text or json", r.Logs)
	}
	if v := env("KERNEL_LOG_FORMAT"); v != "" {
		switch v {
		case "json":
			r.logsJSON = true
		case "text":
			r.logsJSON = false
		default:
			return r, fmt.Errorf("KERNEL_LOG_FORMAT=%q: want text or json", v)
		}
	}
	return r, nil
}

// checkLoopback refuses a metrics listener that is not on a loopback
// address: the numbers name tools, models and rules.
func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("telemetry.metrics.listen %q: want host:port, e.g. 127.0.0.1:9464", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("telemetry.metrics.listen %q: the port must be a number", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("telemetry.metrics.listen %s is not a loopback address: serve metrics to a remote Prometheus through `kernel serve` (/metrics, behind a key with the metrics scope) or a local agent", addr)
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// toolSource is the source label of a tool: builtin, plugin, wasm, mcp.
func toolSource(source string) string {
	kind, _, _ := strings.Cut(source, ":")
	switch kind {
	case "subprocess", "sdk":
		return "plugin"
	case "wasm", "mcp", "builtin":
		return kind
	case "":
		return "builtin"
	}
	return kind
}
