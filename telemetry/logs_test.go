package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentkernel/agentkernel/telemetry"
)

// TestSlogLevel: hclog's levels map onto slog's, trace below debug, so a
// handler at debug drops trace records as hclog would.
func TestSlogLevel(t *testing.T) {
	for l, want := range map[hclog.Level]slog.Level{
		hclog.Trace: slog.LevelDebug - 4,
		hclog.Debug: slog.LevelDebug,
		hclog.Info:  slog.LevelInfo,
		hclog.Warn:  slog.LevelWarn,
		hclog.Error: slog.LevelError,
	} {
		if got := telemetry.SlogLevel(l); got != want {
			t.Errorf("SlogLevel(%s) = %s, want %s", l, got, want)
		}
	}
	if telemetry.SlogLevel(hclog.Trace) >= telemetry.SlogLevel(hclog.Debug) {
		t.Error("trace is not below debug")
	}
}

// records decodes one JSON record a line.
func records(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a JSON record: %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// TestLogHandler: a record logged in a traced context carries its trace
// and span ids, through With and WithGroup too; one outside a trace
// carries none; the scrubber redacts the message and every string value;
// records below the level are dropped.
func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	redact := func(s string) string { return strings.ReplaceAll(s, "hunter2", "[REDACTED]") }
	log := slog.New(telemetry.NewLogHandler(&buf, slog.LevelInfo, redact))
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{8}, TraceFlags: trace.FlagsSampled})
	traced := trace.ContextWithSpanContext(context.Background(), sc)

	log.InfoContext(traced, "password hunter2 seen", "arg", "hunter2", "n", 1)
	log.With("tool", "read_file").WithGroup("call").InfoContext(traced, "ended", "bytes", 10)
	log.InfoContext(context.Background(), "untraced")
	log.DebugContext(traced, "below the level")

	recs := records(t, &buf)
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3 (debug is below the level):\n%s", len(recs), buf.String())
	}
	first := recs[0]
	if first["msg"] != "password [REDACTED] seen" || first["arg"] != "[REDACTED]" || first["n"] != float64(1) {
		t.Errorf("the scrubber missed something: %v", first)
	}
	for _, r := range recs[:2] {
		if r["trace_id"] != sc.TraceID().String() || r["span_id"] != sc.SpanID().String() {
			t.Errorf("traced record %v lacks trace %s span %s", r, sc.TraceID(), sc.SpanID())
		}
	}
	if call, _ := recs[1]["call"].(map[string]any); recs[1]["tool"] != "read_file" || call["bytes"] != float64(10) {
		t.Errorf("With and WithGroup lost their attributes: %v", recs[1])
	}
	if _, ok := recs[2]["trace_id"]; ok {
		t.Errorf("an untraced record has a trace id: %v", recs[2])
	}
}

// stringer is a fmt.Stringer.
type stringer struct{}

func (stringer) String() string { return "as a string" }

// TestHCLoggerArguments: what hclog loggers pass along becomes slog
// attributes: errors and Stringers as their text, a key without a value
// kept as EXTRA_VALUE (as hclog does), other values as they are.
func TestHCLoggerArguments(t *testing.T) {
	var buf bytes.Buffer
	log := telemetry.HCLogger(telemetry.NewLogHandler(&buf, slog.LevelDebug, nil), "kernel", hclog.Debug)
	log.Warn("mixed", "err", errors.New("it broke"), "s", stringer{}, "n", 7, "dangling")
	recs := records(t, &buf)
	if len(recs) != 1 {
		t.Fatalf("%d records: %s", len(recs), buf.String())
	}
	r := recs[0]
	if r["level"] != "WARN" || r["logger"] != "kernel" || r["err"] != "it broke" || r["s"] != "as a string" || r["n"] != float64(7) || r["EXTRA_VALUE"] != "dangling" {
		t.Errorf("record = %v", r)
	}
}
