package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/mcptest"
	"github.com/agentkernel/agentkernel/plugins/mcp"
)

// reportPercentiles adds p50 and p99 of durations (in µs) to b's report.
func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkMCPCall is one call of the test server's echo tool, whose own
// handler time is a few microseconds: the time is the MCP path's overhead
// (encode, transport, decode, result mapping).
func BenchmarkMCPCall(b *testing.B) {
	for _, transport := range []string{"stdio", "http"} {
		b.Run(transport, func(b *testing.B) {
			sc := mcp.ServerConfig{Name: "t"}
			if transport == "http" {
				sc.URL = mcptest.StartHTTP(b)
			} else {
				sc.Command = []string{mcptest.Server(b)}
			}
			h := mcp.NewHost(mcp.HostConfig{})
			defer h.Close()
			tools, _, err := h.Load(context.Background(), sc)
			if err != nil {
				b.Fatal(err)
			}
			var echo = tools[0]
			for _, t := range tools {
				if t.Spec().Name == "t.echo" {
					echo = t
				}
			}
			args := json.RawMessage(`{"text":"x"}`)
			ctx := context.Background()
			durs := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if _, err := echo.Call(ctx, args); err != nil {
					b.Fatal(err)
				}
				durs = append(durs, time.Since(start))
			}
			b.StopTimer()
			reportPercentiles(b, durs)
		})
	}
}

// BenchmarkMCPStart is a stdio server's start: exec, initialize and
// tools/list, until its tools are ready to register.
func BenchmarkMCPStart(b *testing.B) {
	bin := mcptest.Server(b)
	durs := make([]time.Duration, 0, b.N)
	for range b.N {
		h := mcp.NewHost(mcp.HostConfig{})
		start := time.Now()
		if _, _, err := h.Load(context.Background(), mcp.ServerConfig{Name: "t", Command: []string{bin}}); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(start))
		b.StopTimer()
		h.Close()
		b.StartTimer()
	}
	reportPercentiles(b, durs)
}
