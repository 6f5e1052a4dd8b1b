package telemetry

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Transport wraps base (nil: http.DefaultTransport) so that every request
// carries the W3C trace context of its context's span as traceparent (and
// tracestate, baggage): the model server's spans join the run's trace.
func (t *Telemetry) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &traceTransport{base: base, prop: t.prop}
}

type traceTransport struct {
	base http.RoundTripper
	prop propagation.TextMapPropagator
}

func (tt *traceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(req.Context()).IsValid() {
		return tt.base.RoundTrip(req)
	}
	r := req.Clone(req.Context()) // a RoundTripper must not modify the request
	tt.prop.Inject(req.Context(), propagation.HeaderCarrier(r.Header))
	return tt.base.RoundTrip(r)
}

// MetricsHandler serves the metrics in the Prometheus text format (or
// OpenMetrics, when the scraper asks for it). Nil when metrics are off.
func (t *Telemetry) MetricsHandler() http.Handler {
	if t.m == nil {
		return nil
	}
	return promhttp.HandlerFor(t.m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true, MaxRequestsInFlight: 4, Timeout: 10 * time.Second})
}

// ServeMetrics serves GET /metrics on the configured listener
// (telemetry.metrics.listen, a loopback address) until ctx ends, with the
// bearer token of telemetry.metrics.token_env when one is set. ready, when
// not nil, receives the listener's address once it listens.
func (t *Telemetry) ServeMetrics(ctx context.Context, ready func(addr string)) error {
	h := t.MetricsHandler()
	if h == nil || t.cfg.Metrics.Listen == "" {
		return errors.New("telemetry: no metrics listener is configured")
	}
	token := ""
	if name := t.cfg.Metrics.TokenEnv; name != "" {
		token = getenv(t.cfg.Getenv, name)
	}
	ln, err := net.Listen("tcp", t.cfg.Metrics.Listen)
	if err != nil {
		return fmt.Errorf("telemetry.metrics.listen %s: %w", t.cfg.Metrics.Listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", requireToken(token, h))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 16 << 10}
	if ready != nil {
		ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	<-errc
	return nil
}

// requireToken wraps h with a bearer token check; an empty token checks
// nothing.
func requireToken(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(strings.TrimSpace(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "unauthorized: Authorization: Bearer <the token in telemetry.metrics.token_env>", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func getenv(f func(string) string, name string) string {
	if f == nil {
		return os.Getenv(name)
	}
	return f(name)
}
