package serve_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/serve"
)

// openIdle opens an approvals stream for key on a raw connection and
// reads its status line only; it returns the status and the connection.
func openIdle(tb testing.TB, url, key string) (int, net.Conn) {
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	fmt.Fprintf(c, "GET /v1/approvals/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", key)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		tb.Fatal(err)
	}
	return res.StatusCode, c
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// BenchmarkIdleStreams is issue 36's stream measurement: one read key
// opens 1,000 approvals streams and never reads them; then an approver
// opens its own and waits for the first event. With the key's cap raised
// to hold all 1,000 (cap-1000) it reports what they cost the server —
// heap (after GC, client and server in one process) and goroutines per
// stream — and with the default cap (64) how many were held. Both report
// the approver's time to its first event (p50, p99 over b.N streams).
func BenchmarkIdleStreams(b *testing.B) {
	for _, tc := range []struct {
		name   string
		perKey int
	}{{"cap-1000", 1000}, {"default-cap", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			r := newRigTB(b, rigOpts{limits: serve.Limits{MaxStreamsPerKey: tc.perKey}})
			h0, g0 := heapInUse(), runtime.NumGoroutine()
			held := 0
			var conns []net.Conn
			for range 1000 {
				code, c := openIdle(b, r.url, r.reader)
				if code == 200 {
					held++
					conns = append(conns, c)
				} else {
					c.Close()
				}
			}
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			if got := r.srv.Stats().Streams; got != held {
				b.Fatalf("the server counts %d streams, %d held", got, held)
			}
			h1, g1 := heapInUse(), runtime.NumGoroutine()
			var ttfe []time.Duration
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				req, _ := http.NewRequestWithContext(ctx, "GET", r.url+"/v1/approvals/stream", nil)
				req.Header.Set("Authorization", "Bearer "+r.alice)
				start := time.Now()
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				if res.StatusCode != 200 {
					body, _ := io.ReadAll(res.Body)
					b.Fatalf("the approver was refused: %d %s", res.StatusCode, body)
				}
				if _, err := readSSE(res.Body, func(sseEvent) bool { return true }); err != nil {
					b.Fatal(err)
				}
				ttfe = append(ttfe, time.Since(start))
				res.Body.Close()
				cancel()
			}
			b.ReportMetric(float64(held), "held-streams")
			if held > 0 {
				b.ReportMetric(float64(int64(h1)-int64(h0))/float64(held)/1024, "heap-KiB/stream")
				b.ReportMetric(float64(g1-g0)/float64(held), "goroutines/stream")
			}
			slices.Sort(ttfe)
			b.ReportMetric(float64(ttfe[len(ttfe)/2].Microseconds()), "approver-first-event-p50-µs")
			b.ReportMetric(float64(ttfe[len(ttfe)*99/100].Microseconds()), "approver-first-event-p99-µs")
		})
	}
}
