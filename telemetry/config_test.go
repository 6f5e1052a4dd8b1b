package telemetry_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/telemetry"
)

// TestConfigFields: the configuration's own fields (no variables set) turn
// traces and metrics on, choose the format of the logs, and every value
// New does not know is an error naming the field it came from.
func TestConfigFields(t *testing.T) {
	noEnv := func(string) string { return "" }
	tokenEnv := func(k string) string { return map[string]string{"TOK": "secret"}[k] }
	for _, tc := range []struct {
		name            string
		cfg             telemetry.Config
		traces, metrics bool
		logsJSON        bool
		err             string
	}{
		{name: "zero is off", cfg: telemetry.Config{Getenv: noEnv}},
		{name: "console exporter", cfg: telemetry.Config{Getenv: noEnv, Traces: telemetry.TracesConfig{Exporter: "console"}}, traces: true},
		{name: "an endpoint means otlp", cfg: telemetry.Config{Getenv: noEnv, Traces: telemetry.TracesConfig{Endpoint: "http://127.0.0.1:1"}}, traces: true},
		{name: "exporter none", cfg: telemetry.Config{Getenv: noEnv, Traces: telemetry.TracesConfig{Exporter: "none", Endpoint: "http://127.0.0.1:1"}}},
		{name: "grpc", cfg: telemetry.Config{Getenv: noEnv, Traces: telemetry.TracesConfig{Exporter: "otlp", Protocol: "grpc", Endpoint: "http://127.0.0.1:1"}}, traces: true},
		{name: "unknown exporter", cfg: telemetry.Config{Getenv: noEnv, Traces: telemetry.TracesConfig{Exporter: "jaeger"}}, err: "telemetry.traces.exporter"},
		{name: "unknown protocol", cfg: telemetry.Config{Getenv: noEnv, Traces: telemetry.TracesConfig{Exporter: "otlp", Protocol: "http/json"}}, err: "telemetry.traces.protocol"},
		{name: "metrics enabled", cfg: telemetry.Config{Getenv: noEnv, Metrics: telemetry.MetricsConfig{Enabled: true}}, metrics: true},
		{name: "a listener turns metrics on", cfg: telemetry.Config{Getenv: tokenEnv, Metrics: telemetry.MetricsConfig{Listen: "127.0.0.1:0", TokenEnv: "TOK"}}, metrics: true},
		{name: "localhost listener", cfg: telemetry.Config{Getenv: tokenEnv, Metrics: telemetry.MetricsConfig{Listen: "localhost:9464", TokenEnv: "TOK"}}, metrics: true},
		{name: "IPv6 loopback listener", cfg: telemetry.Config{Getenv: tokenEnv, Metrics: telemetry.MetricsConfig{Listen: "[::1]:9464", TokenEnv: "TOK"}}, metrics: true},
		{name: "a listener on the network", cfg: telemetry.Config{Getenv: tokenEnv, Metrics: telemetry.MetricsConfig{Listen: "10.1.2.3:9464", TokenEnv: "TOK"}}, err: "telemetry.metrics.listen 10.1.2.3:9464 is not a loopback address"},
		{name: "a listener without a port", cfg: telemetry.Config{Getenv: tokenEnv, Metrics: telemetry.MetricsConfig{Listen: "127.0.0.1", TokenEnv: "TOK"}}, err: "want host:port"},
		{name: "a port that is no number", cfg: telemetry.Config{Getenv: tokenEnv, Metrics: telemetry.MetricsConfig{Listen: "127.0.0.1:http", TokenEnv: "TOK"}}, err: "the port must be a number"},
		{name: "a listener without a token", cfg: telemetry.Config{Getenv: noEnv, Metrics: telemetry.MetricsConfig{Listen: "127.0.0.1:9464"}}, err: "needs a bearer token"},
		{name: "json logs", cfg: telemetry.Config{Getenv: noEnv, Logs: "json"}, logsJSON: true},
		{name: "text logs", cfg: telemetry.Config{Getenv: noEnv, Logs: "text"}},
		{name: "unknown log format", cfg: telemetry.Config{Getenv: noEnv, Logs: "yaml"}, err: `telemetry.logs "yaml"`},
		{name: "content without the scrubber", cfg: telemetry.Config{Getenv: noEnv, Content: true}, err: "needs the scrubber"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tel := newOrErr(t, tc.cfg, tc.err)
			if tel == nil {
				return
			}
			if tel.TracesOn() != tc.traces || tel.MetricsOn() != tc.metrics || tel.LogsJSON() != tc.logsJSON {
				t.Errorf("traces %v metrics %v json logs %v, want %v %v %v", tel.TracesOn(), tel.MetricsOn(), tel.LogsJSON(), tc.traces, tc.metrics, tc.logsJSON)
			}
			if tel.Enabled() != (tc.traces || tc.metrics) {
				t.Errorf("Enabled() = %v with traces %v, metrics %v", tel.Enabled(), tc.traces, tc.metrics)
			}
			if (tel.MetricsHandler() != nil) != tc.metrics {
				t.Errorf("MetricsHandler() is %v with metrics %v", tel.MetricsHandler(), tc.metrics)
			}
		})
	}
}

// TestVariablesWinOverFields: each standard variable wins over the field
// it stands for, and a bad value names the variable.
func TestVariablesWinOverFields(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		cfg      telemetry.Config
		traces   bool
		logsJSON bool
		content  bool
		err      string
	}{
		{name: "OTEL_TRACES_EXPORTER none beats the field", env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}, cfg: telemetry.Config{Traces: telemetry.TracesConfig{Exporter: "console"}}},
		{name: "OTEL_TRACES_EXPORTER console beats none", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, cfg: telemetry.Config{Traces: telemetry.TracesConfig{Exporter: "none"}}, traces: true},
		{name: "the traces endpoint variable", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1"}, traces: true},
		{name: "the traces protocol variable beats the field", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "bogus"}, cfg: telemetry.Config{Traces: telemetry.TracesConfig{Exporter: "otlp", Protocol: "grpc"}}, err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "OTEL_SDK_DISABLED beats an exporter set by the program", env: map[string]string{"OTEL_SDK_DISABLED": "true"}, cfg: telemetry.Config{SpanExporter: tracetest.NewInMemoryExporter()}},
		{name: "KERNEL_LOG_FORMAT json", env: map[string]string{"KERNEL_LOG_FORMAT": "json"}, logsJSON: true},
		{name: "KERNEL_LOG_FORMAT text beats the field", env: map[string]string{"KERNEL_LOG_FORMAT": "text"}, cfg: telemetry.Config{Logs: "json"}},
		{name: "KERNEL_LOG_FORMAT bad", env: map[string]string{"KERNEL_LOG_FORMAT": "xml"}, err: `KERNEL_LOG_FORMAT="xml"`},
		{name: "content variable", env: map[string]string{"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}, cfg: telemetry.Config{Scrub: strings.ToUpper}, content: true},
		{name: "content variable false beats the field", env: map[string]string{"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false"}, cfg: telemetry.Config{Content: true}},
		{name: "content variable bad", env: map[string]string{"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "yes please"}, err: "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"},
		{name: "metrics exporter otlp", env: map[string]string{"OTEL_METRICS_EXPORTER": "otlp"}, err: "OTEL_METRICS_EXPORTER"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Getenv = func(k string) string { return tc.env[k] }
			tel := newOrErr(t, cfg, tc.err)
			if tel == nil {
				return
			}
			if tel.TracesOn() != tc.traces || tel.LogsJSON() != tc.logsJSON || tel.ContentOn() != tc.content {
				t.Errorf("traces %v json logs %v content %v, want %v %v %v", tel.TracesOn(), tel.LogsJSON(), tel.ContentOn(), tc.traces, tc.logsJSON, tc.content)
			}
		})
	}
}

// TestConsoleExporter: OTEL_TRACES_EXPORTER=console writes the spans to
// Config.Console (standard error by default, never standard output, which
// is the answer's), named after the run's agent and carrying the service
// name of OTEL_SERVICE_NAME.
func TestConsoleExporter(t *testing.T) {
	var out bytes.Buffer
	env := map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "svc-under-test"}
	tel, err := telemetry.New(context.Background(), telemetry.Config{Getenv: func(k string) string { return env[k] }, Console: &out, AgentName: "bot"})
	if err != nil {
		t.Fatal(err)
	}
	_, ro := tel.Observe(context.Background(), kernel.RunInfo{SessionID: "s1", Model: "m"})
	ro.End(&kernel.RunResult{StopReason: kernel.StopCompleted}, nil)
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"Name":"invoke_agent bot"`, "svc-under-test", `"s1"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the console output lacks %s:\n%s", want, out.String())
		}
	}
}

// newOrErr is telemetry.New(cfg): with wantErr, nil after checking the
// error contains it; else the Telemetry, shut down when the test ends.
func newOrErr(t *testing.T, cfg telemetry.Config, wantErr string) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.New(context.Background(), cfg)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want one containing %q", err, wantErr)
		}
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	return tel
}
