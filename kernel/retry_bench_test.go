package kernel

import (
	"context"
	"testing"
	"time"
)

// okProvider answers every request at once.
type okProvider struct{}

func (okProvider) Stream(ctx context.Context, req Request, emit func(Delta)) (Response, error) {
	emit(Delta{Text: "ok"})
	return Response{Message: Message{Role: RoleAssistant, Content: "ok"}}, nil
}

// BenchmarkRetryOverhead compares one successful model call made directly
// (the provider call under the model timeout, as the loop made it before
// retries existed) with the same call through callModel, the retry and
// fallback wrapper.
func BenchmarkRetryOverhead(b *testing.B) {
	k, err := New(Config{Provider: okProvider{}, Store: nopStore{}, Model: "m", OnEvent: func(Event) {}})
	if err != nil {
		b.Fatal(err)
	}
	r := &run{k: k}
	r.deltaFn = r.onDelta
	req := Request{Model: "m", Messages: []Message{{Role: RoleUser, Content: "hi"}}}
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			if _, err := k.cfg.Provider.Stream(cctx, req, r.deltaFn); err != nil {
				b.Fatal(err)
			}
			cancel()
		}
	})
	b.Run("callModel", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.callModel(ctx, req, genCall{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// nopStore is a Store that stores nothing; the benchmark never commits.
type nopStore struct{ Store }
