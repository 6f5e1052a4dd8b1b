package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/telemetry"
)

// TestTransportCarriesTheTraceContext: a model request made in a traced
// run's context carries the run's W3C trace context (traceparent, with the
// run's trace id and the caller's span as parent) to the model server; a
// request outside a trace carries none; the caller's request is left as
// it was (a RoundTripper must not change it).
func TestTransportCarriesTheTraceContext(t *testing.T) {
	got := make(chan http.Header, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	defer srv.Close()
	tel, err := telemetry.New(context.Background(), telemetry.Config{Getenv: func(string) string { return "" }, SpanExporter: tracetest.NewInMemoryExporter()})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	client := &http.Client{Transport: tel.Transport(nil)}

	ctx, ro := tel.Observe(context.Background(), kernel.RunInfo{SessionID: "s", Model: "m"})
	defer ro.End(&kernel.RunResult{StopReason: kernel.StopCompleted}, nil)
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		t.Fatal("Observe gave no span")
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := <-got
	tp := h.Get("Traceparent")
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; tp != want {
		t.Errorf("traceparent = %q, want %q", tp, want)
	}
	if req.Header.Get("Traceparent") != "" {
		t.Error("the transport changed the caller's request")
	}

	plain, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
	resp, err = client.Do(plain)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := <-got; h.Get("Traceparent") != "" {
		t.Errorf("a request outside a trace carries traceparent %q", h.Get("Traceparent"))
	}
}

// TestServeMetricsNeedsAListener: ServeMetrics refuses to start without a
// configured listener (metrics off, or on without telemetry.metrics.listen)
// instead of serving nothing.
func TestServeMetricsNeedsAListener(t *testing.T) {
	for name, cfg := range map[string]telemetry.Config{
		"metrics off":         {Getenv: func(string) string { return "" }},
		"metrics on, no port": {Getenv: func(string) string { return "" }, Metrics: telemetry.MetricsConfig{Enabled: true}},
	} {
		tel, err := telemetry.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := tel.ServeMetrics(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "no metrics listener") {
			t.Errorf("%s: ServeMetrics = %v, want an error saying no listener is configured", name, err)
		}
		tel.Shutdown(context.Background())
	}
}
