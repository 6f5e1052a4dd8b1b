package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/testutil"
)

// latencies collects per-call durations and reports their percentiles.
type latencies []time.Duration

func (l latencies) report(b *testing.B, prefix string) {
	if len(l) == 0 {
		return
	}
	s := slices.Clone(l)
	slices.Sort(s)
	pct := func(p float64) float64 {
		return float64(s[min(len(s)-1, int(float64(len(s))*p))].Microseconds())
	}
	b.ReportMetric(pct(0.50), prefix+"p50-µs")
	b.ReportMetric(pct(0.99), prefix+"p99-µs")
}

// BenchmarkCompileCold compiles the attack fixture (a 3.9 MB Go module)
// into an empty cache: what the first start after an upgrade costs.
func BenchmarkCompileCold(b *testing.B) {
	// CPU time as well: on a shared machine the wall time is mostly
	// waiting for a core (wazero compiles on every core it gets).
	var cpu time.Duration
	defer func() { b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op") }()
	for b.Loop() {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), "cache")
		h, err := NewHost(context.Background(), HostConfig{CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c0 := testutil.CPUTime()
		if _, _, err := loadReady(h, ModuleConfig{Path: attackWasm}); err != nil {
			b.Fatal(err)
		}
		cpu += testutil.CPUTime() - c0
		b.StopTimer()
		h.Close(context.Background())
		b.StartTimer()
	}
}

// BenchmarkLoadFromCache starts a Host and loads a module whose compiled
// code is in the cache: what every kernel start costs per module.
func BenchmarkLoadFromCache(b *testing.B) {
	for _, p := range []string{attackWasm, "../../wasm-tools/jq/jq.wasm", "../../wasm-tools/js/js.wasm", gojqWasm} {
		b.Run(filepathBase(p), func(b *testing.B) {
			if _, err := os.Stat(p); err != nil {
				b.Skipf("%v (run make wasm)", err)
			}
			warm := newTestHost(b)
			load(b, warm, ModuleConfig{Path: p}) // fill the cache
			// CPU time as well: on a shared machine the wall time is
			// mostly waiting for a core.
			var cpu time.Duration
			defer func() { b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op") }()
			for b.Loop() {
				c0 := testutil.CPUTime()
				h, err := NewHost(context.Background(), HostConfig{CacheDir: testCacheDir})
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := loadReady(h, ModuleConfig{Path: p}); err != nil {
					b.Fatal(err)
				}
				cpu += testutil.CPUTime() - c0
				b.StopTimer()
				h.Close(context.Background())
				b.StartTimer()
			}
		})
	}
}

// BenchmarkCallJSON: a json-ABI call, a fresh instance per call (the Go
// runtime starts every time).
func BenchmarkCallJSON(b *testing.B) {
	h := newTestHost(b)
	tools, _ := load(b, h, ModuleConfig{Path: attackWasm})
	echo := tools["echo"]
	args := json.RawMessage(`{"text":"hi"}`)
	var lat latencies
	for b.Loop() {
		start := time.Now()
		if _, err := echo.Call(context.Background(), args); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	lat.report(b, "")
}

// BenchmarkCallReactor: a reactor call served by a pre-warmed instance
// (pool 4; the benchmark waits, untimed, for the pool to hold one), and the
// same call instantiating on demand (pool 0), the naive fresh instance.
func BenchmarkCallReactor(b *testing.B) {
	for _, size := range []int{4, 0} {
		name := "pooled"
		if size == 0 {
			name = "on-demand"
		}
		b.Run(name, func(b *testing.B) {
			h := newTestHost(b)
			tools, _ := load(b, h, ModuleConfig{Path: reactorWasm, Pool: size})
			echo := tools["echo"]
			p := echo.(*tool).m.pool
			args := json.RawMessage(`{"text":"hi"}`)
			var lat latencies
			for b.Loop() {
				if p != nil {
					b.StopTimer()
					for len(p.ready) < cap(p.ready) {
						time.Sleep(100 * time.Microsecond)
					}
					b.StartTimer()
				}
				start := time.Now()
				if _, err := echo.Call(context.Background(), args); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			lat.report(b, "")
			if p != nil {
				b.ReportMetric(float64(p.hits.Load())/float64(p.hits.Load()+p.misses.Load()), "pool-hit-ratio")
			}
		})
	}
}

// BenchmarkDeadlineOverrun: how long after its deadline a runaway loop
// returns (the caller's deadline, 20 ms after the call starts).
func BenchmarkDeadlineOverrun(b *testing.B) {
	tools := attackTools(b)
	loop := tools["loop"]
	var lat latencies
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		deadline, _ := ctx.Deadline()
		_, err := loop.Call(ctx, json.RawMessage(`{}`))
		lat = append(lat, time.Since(deadline))
		cancel()
		if err == nil {
			b.Fatal("the loop returned")
		}
	}
	lat.report(b, "overrun-")
}

// BenchmarkStartUnused: what a run that calls no WASM tool pays for jq,
// js and gojq configured: a new Host, three Loads (manifests only) and
// Close.
func BenchmarkStartUnused(b *testing.B) {
	paths := []string{"../../wasm-tools/jq/jq.wasm", "../../wasm-tools/js/js.wasm", gojqWasm}
	// CPU time as well as wall time: on a shared machine the wall time is
	// mostly waiting for a core.
	cpu0 := testutil.CPUTime()
	defer func() { b.ReportMetric(float64((testutil.CPUTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op") }()
	for b.Loop() {
		h, err := NewHost(context.Background(), HostConfig{CacheDir: testCacheDir})
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range paths {
			if _, _, err := h.Load(context.Background(), ModuleConfig{Path: p, Pool: map[bool]int{true: 2}[strings.Contains(p, "js.wasm")]}); err != nil {
				b.Fatal(err)
			}
		}
		if err := h.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallReactorConcurrent: reactor calls (pool 4) made by 1 and by
// 50 callers at once; per-call latency percentiles. With 50 callers most
// calls wait for one of the module's max_concurrency slots and find the
// pool empty, so their latency is mostly queueing and instantiation.
func BenchmarkCallReactorConcurrent(b *testing.B) {
	for _, callers := range []int{1, 50} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			h := newTestHost(b)
			tools, _ := load(b, h, ModuleConfig{Path: reactorWasm, Pool: 4})
			echo := tools["echo"]
			p := echo.(*tool).m.pool
			waitReady := func() {
				for len(p.ready) < cap(p.ready) {
					time.Sleep(100 * time.Microsecond)
				}
			}
			args := json.RawMessage(`{"text":"hi"}`)
			var mu sync.Mutex
			var lat latencies
			for b.Loop() {
				b.StopTimer()
				waitReady()
				b.StartTimer()
				var wg sync.WaitGroup
				for range callers {
					wg.Go(func() {
						start := time.Now()
						_, err := echo.Call(context.Background(), args)
						d := time.Since(start)
						if err != nil {
							b.Error(err)
						}
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					})
				}
				wg.Wait()
			}
			lat.report(b, "")
		})
	}
}

// BenchmarkDeadlineOverrunParallel: 50 runaway loops at once, each with a
// 200 ms deadline; how long after its deadline each call returns, with the
// host's default limit on running guests (DefaultMaxRunning) and with all
// 50 running at once (max_running=50, what the host did before it had the
// limit). Calls beyond the limits wait in line and end there at their
// deadline; those running must be noticed by wazero's close-on-deadline
// goroutine and then reach a loop header.
func BenchmarkDeadlineOverrunParallel(b *testing.B) {
	const calls = 50
	for _, running := range []int{0, calls} {
		name := "max_running=default"
		if running > 0 {
			name = fmt.Sprintf("max_running=%d", running)
		}
		b.Run(name, func(b *testing.B) {
			h, err := NewHost(context.Background(), HostConfig{CacheDir: testCacheDir, MaxRunning: running})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(context.Background())
			tools, _ := load(b, h, ModuleConfig{Path: attackWasm, MaxConcurrency: calls, Grants: Grants{MemoryMB: 32, Timeout: Duration(time.Minute)}})
			loop := tools["loop"]
			var mu sync.Mutex
			var lat latencies
			for b.Loop() {
				var wg sync.WaitGroup
				for range calls {
					wg.Go(func() {
						ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
						defer cancel()
						deadline, _ := ctx.Deadline()
						_, err := loop.Call(ctx, json.RawMessage(`{}`))
						d := time.Since(deadline)
						if err == nil {
							b.Error("the loop returned")
						}
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					})
				}
				wg.Wait()
			}
			lat.report(b, "overrun-")
		})
	}
}

// BenchmarkCacheVerify is the MAC check of a module's compilation-cache
// entries alone (read every byte, HMAC-SHA256, compare): what the MAC
// adds to every load from the cache. Compare its cpu-µs/op with
// BenchmarkLoadFromCache's for the same module; entry-MB is the size
// checked.
func BenchmarkCacheVerify(b *testing.B) {
	for _, p := range []string{attackWasm, "../../wasm-tools/jq/jq.wasm", "../../wasm-tools/js/js.wasm", gojqWasm} {
		b.Run(filepathBase(p), func(b *testing.B) {
			if _, err := os.Stat(p); err != nil {
				b.Skipf("%v (run make wasm)", err)
			}
			h := newTestHost(b)
			load(b, h, ModuleConfig{Path: p}) // fill the cache
			bin, err := os.ReadFile(p)
			if err != nil {
				b.Fatal(err)
			}
			sha := fmt.Sprintf("%x", sha256.Sum256(bin))
			var cpu time.Duration
			var size int64
			for b.Loop() {
				c0 := testutil.CPUTime()
				mc, err := openModuleCache(h.cacheRoot, sha, h.cacheKey, h.log)
				if err != nil {
					b.Fatal(err)
				}
				good, removed, err := mc.verify()
				mc.unlock()
				cpu += testutil.CPUTime() - c0
				if err != nil || removed != 0 || len(good) == 0 {
					b.Fatalf("verify: %d good, %d removed, %v", len(good), removed, err)
				}
				size = 0
				for _, e := range good {
					size += e.size
				}
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(size)/(1<<20), "entry-MB")
		})
	}
}
