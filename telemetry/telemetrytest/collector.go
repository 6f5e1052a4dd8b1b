// Package telemetrytest is an in-process OTLP trace collector for tests:
// it listens on loopback for OTLP/HTTP (protobuf) and OTLP/gRPC and keeps
// every span it receives.
package telemetrytest

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened.
type Span struct {
	Service  string
	Scope    string
	Name     string
	TraceID  string
	SpanID   string
	ParentID string
	Kind     tracepb.Span_SpanKind
	Attrs    map[string]string
	Status   tracepb.Status_StatusCode
}

// Collector receives spans. Safe for concurrent use.
type Collector struct {
	// HTTPEndpoint is the OTLP/HTTP base URL (http://127.0.0.1:PORT), for
	// OTEL_EXPORTER_OTLP_ENDPOINT; GRPCEndpoint the gRPC one.
	HTTPEndpoint string
	GRPCEndpoint string
	// HTTPPort is the HTTP listener's port (for a sandbox grant).
	HTTPPort int

	mu     sync.Mutex
	spans  []Span
	notify chan struct{}
}

// New starts a collector on loopback; it stops when the test ends.
func New(t testing.TB) *Collector {
	t.Helper()
	c := &Collector{notify: make(chan struct{}, 1)}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.HTTPEndpoint = "http://" + hl.Addr().String()
	c.HTTPPort = hl.Addr().(*net.TCPAddr).Port
	c.GRPCEndpoint = "http://" + gl.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.add(req.GetResourceSpans())
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(hl)
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, &grpcService{c: c})
	go gs.Serve(gl)
	t.Cleanup(func() {
		hs.Close()
		gs.Stop()
	})
	return c
}

type grpcService struct {
	coltracepb.UnimplementedTraceServiceServer
	c *Collector
}

func (g *grpcService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.c.add(req.GetResourceSpans())
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (c *Collector) add(rss []*tracepb.ResourceSpans) {
	var got []Span
	for _, rs := range rss {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{Service: service, Scope: ss.GetScope().GetName(), Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()),
					SpanID: hex.EncodeToString(s.GetSpanId()), ParentID: hex.EncodeToString(s.GetParentSpanId()), Kind: s.GetKind(),
					Attrs: map[string]string{}, Status: s.GetStatus().GetCode()}
				for _, kv := range s.GetAttributes() {
					sp.Attrs[kv.GetKey()] = text(kv.GetValue())
				}
				got = append(got, sp)
			}
		}
	}
	c.mu.Lock()
	c.spans = append(c.spans, got...)
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func text(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_ArrayValue:
		s := ""
		for i, e := range x.ArrayValue.GetValues() {
			if i > 0 {
				s += ","
			}
			s += text(e)
		}
		return s
	}
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	}
	return ""
}

// Spans returns the spans received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Wait waits until ok holds for the spans received, or the timeout
// passes, and returns the spans.
func (c *Collector) Wait(timeout time.Duration, ok func([]Span) bool) []Span {
	deadline := time.After(timeout)
	for {
		s := c.Spans()
		if ok(s) {
			return s
		}
		select {
		case <-c.notify:
		case <-deadline:
			return c.Spans()
		}
	}
}
