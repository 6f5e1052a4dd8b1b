package declared_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// BenchmarkHTTPCall: a declared HTTP tool's call (arguments decoded, URL,
// headers and body built, the guarded client, the answer read, checked and
// cut) against a raw net/http request to the same local server, with
// keep-alive on both. p50-ns is each one's median; the difference is what
// the declared tool adds.
func BenchmarkHTTPCall(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"T-7","title":"Disk full on db-2","status":"open"}`)
	}))
	defer srv.Close()
	median := func(b *testing.B, d []time.Duration) {
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
	}
	b.Run("raw", func(b *testing.B) {
		c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
		defer c.CloseIdleConnections()
		var lat []time.Duration
		for b.Loop() {
			start := time.Now()
			req, _ := http.NewRequestWithContext(context.Background(), "GET", srv.URL+"/v1/tickets/T-7?fields=title", nil)
			req.Header.Set("Authorization", "Bearer tk-bench-123456")
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20)); err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			lat = append(lat, time.Since(start))
		}
		median(b, lat)
	})
	b.Run("declared", func(b *testing.B) {
		o := options(nil, env{"BENCH_TOKEN": "tk-bench-123456"}) // the real network
		tools := mustBuild(b, `
tools:
  http:
    - name: get_ticket
      description: Look up a ticket.
      url: "`+srv.URL+`/v1/tickets/{id}?fields={fields}"
      headers: {Authorization: "Bearer ${env:BENCH_TOKEN}"}
      egress: {networks: [127.0.0.1/32]}
      args: {type: object, required: [id], properties: {id: {type: string}, fields: {type: string}}}
`, o)
		tl := tools["get_ticket"]
		args := json.RawMessage(`{"id":"T-7","fields":"title"}`)
		var lat []time.Duration
		for b.Loop() {
			start := time.Now()
			res, err := tl.Call(context.Background(), args)
			if err != nil || res.Content == "" {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		median(b, lat)
	})
}
