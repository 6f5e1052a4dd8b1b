package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentkernel/agentkernel/telemetry"
)

// TestMetricsListenerToken: with telemetry.metrics.token_env the metrics
// listener answers only a request bearing that token; a token_env naming
// an unset variable is an error, not a listener without a token.
func TestMetricsListenerToken(t *testing.T) {
	env := map[string]string{"METRICS_TOKEN": "s3cret-token"}
	cfg := telemetry.Config{Getenv: func(k string) string { return env[k] }}
	cfg.Metrics.Listen, cfg.Metrics.TokenEnv = "127.0.0.1:0", "METRICS_TOKEN"
	tel, err := telemetry.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- tel.ServeMetrics(ctx, func(a string) { addr <- a }) }()
	base := "http://" + <-addr + "/metrics"
	get := func(auth string) (int, string) {
		req, _ := http.NewRequest("GET", base, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret-token-and-more", "s3cret-token", "Basic czNjcmV0LXRva2Vu"} {
		if code, body := get(auth); code != http.StatusUnauthorized || strings.Contains(body, "agentkernel_") {
			t.Errorf("Authorization %q: %d, want 401 and no metrics:\n%s", auth, code, body)
		}
	}
	if code, body := get("Bearer s3cret-token"); code != http.StatusOK || !strings.Contains(body, "agentkernel_runs_total") {
		t.Errorf("with the token: %d\n%s", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ServeMetrics: %v", err)
	}

	delete(env, "METRICS_TOKEN")
	if _, err := telemetry.New(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "METRICS_TOKEN") {
		t.Fatalf("token_env naming an unset variable: err = %v, want one naming it", err)
	}
}

// TestLogBridge: the kernel's hclog loggers (the plugin hosts', and
// go-plugin's relay of each plugin's own output) write JSON records into
// the one slog handler, named, scrubbed; a record logged in a traced
// context carries its trace and span ids.
func TestLogBridge(t *testing.T) {
	var buf bytes.Buffer
	h := telemetry.NewLogHandler(&buf, slog.LevelDebug, scrub)
	log := telemetry.HCLogger(h, "kernel", hclog.Debug)
	log.Named("plugins").Named("git").Info("plugin said", "line", "token=sk-abc123", "n", 3)
	log.Trace("below the level")

	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	slog.New(h).DebugContext(trace.ContextWithSpanContext(context.Background(), sc), "tool call ended", "tool", "git.git_log")

	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON record: %q: %v", line, err)
		}
		recs = append(recs, rec)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2 (the trace level is below debug):\n%s", len(recs), buf.String())
	}
	if p := recs[0]; p["logger"] != "kernel.plugins.git" || p["level"] != "INFO" || p["msg"] != "plugin said" || p["line"] != "token=[REDACTED]" || p["n"] != float64(3) {
		t.Errorf("the plugin's record: %v", p)
	}
	if r := recs[1]; r["trace_id"] != sc.TraceID().String() || r["span_id"] != sc.SpanID().String() {
		t.Errorf("the traced record: %v, want trace %s span %s", r, sc.TraceID(), sc.SpanID())
	}
}
