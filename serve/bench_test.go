package serve_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
	"github.com/agentkernel/agentkernel/serve"
)

// benchScript is a 2-turn run with a tool call.
const benchScript = `
steps:
  - text: "Reading."
    tool_calls:
      - name: read_file
        args: {path: notes.txt}
  - text: "Done reading."
`

// BenchmarkRunLatency compares one run in process (Kernel.Run on the
// server's own kernel and store) with the same run through HTTP and SSE
// (POST the run, read the session's stream until run.completed). The
// added-p50-µs metric is the difference of the two medians. post-sse is
// the same run POSTed with Accept: text/event-stream: one request, whose
// response carries the run's events, measured to its run.completed.
// The badger and postgres variants include the event log's durable
// writes, which the in-process run does not make; the memory variant is
// HTTP and SSE alone. The postgres variant's server keeps fsync on
// (pgtest.Options.Durable), as the store benchmarks' does.
func BenchmarkRunLatency(b *testing.B) {
	for _, store := range []string{"badger", "postgres", "memory", "postgres-long"} {
		b.Run(store, func(b *testing.B) { benchRunLatency(b, store) })
	}
}

// longRuns is how many runs the -long variants make on their session
// before they measure: 4 messages a run, a 500-message history, which the
// server's ownership checks (the 202, the stream's start) read whole
// unless the store has kernel.SessionHeadLoader.
const longRuns = 125

// longScript is benchScript's run once for each run a -long variant
// makes on its one session (the scripted model answers by the number of
// assistant turns before): the seeding runs and up to 1000 measured.
var longScript = "steps:\n" + strings.Repeat(strings.SplitN(benchScript, "steps:\n", 2)[1], longRuns+1000)

func benchRunLatency(b *testing.B, store string) {
	o := rigOpts{script: benchScript}
	long := strings.HasSuffix(store, "-long")
	if long {
		o.script = longScript
	}
	switch strings.TrimSuffix(store, "-long") {
	case "badger":
		o.badger = filepath.Join(b.TempDir(), "store")
	case "postgres":
		srv, err := pgtest.Start(pgtest.Options{Durable: true})
		if err != nil {
			pgtest.Shared(b) // names the missing server the way every test does
			b.Fatal(err)
		}
		b.Cleanup(func() { srv.Stop() })
		o.pg, o.replica = srv.Migrated(b), "bench"
	}
	r := newRigTB(b, o)
	ctx := context.Background()
	// session is the session a run measures: a new one each time, or, in
	// a -long variant, one that already holds a long history.
	session := func() string { return r.newSession(r.alice) }
	var cursor uint64 // the last event stored on a -long session
	if long {
		sid := r.newSession(r.alice)
		for range longRuns {
			if _, err := r.kernel.Run(ctx, sid, "read"); err != nil {
				b.Fatal(err)
			}
		}
		session = func() string { return sid }
		// The stream of a run on it starts after the events already
		// stored (else it would stop at an earlier run's end).
		el := r.store.(kernel.EventLog)
		for {
			evs, err := el.ReadEvents(ctx, sid, cursor, 512)
			if err != nil {
				b.Fatal(err)
			}
			if len(evs) == 0 {
				break
			}
			cursor = evs[len(evs)-1].Seq
		}
	}
	var inproc, viaHTTP []time.Duration
	b.Run("in-process", func(b *testing.B) {
		for b.Loop() {
			sid := session()
			start := time.Now()
			if _, err := r.kernel.Run(ctx, sid, "read"); err != nil {
				b.Fatal(err)
			}
			inproc = append(inproc, time.Since(start))
		}
		b.ReportMetric(float64(median(inproc).Microseconds()), "p50-µs")
	})
	b.Run("http-sse", func(b *testing.B) {
		for b.Loop() {
			sid := session()
			start := time.Now()
			done := make(chan error, 1)
			after := ""
			if long {
				after = strconv.FormatUint(cursor, 10)
			}
			go func() {
				evs, err := r.stream(ctx, r.alice, sid, after, func(e sseEvent) bool { return e.typ == "run.completed" })
				if err == nil && long && len(evs) > 0 {
					cursor, err = strconv.ParseUint(evs[len(evs)-1].id, 10, 64)
				}
				done <- err
			}()
			if p := r.doNoCheck("POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "read"}); p.status != 202 {
				b.Fatalf("run: %d %s", p.status, p.body)
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			viaHTTP = append(viaHTTP, time.Since(start))
			if long { // the next run on the session waits for this one's end record
				r.waitStatus(r.alice, sid, "idle")
			}
		}
		b.ReportMetric(float64(median(viaHTTP).Microseconds()), "p50-µs")
		if len(inproc) > 0 {
			b.ReportMetric(float64((median(viaHTTP) - median(inproc)).Microseconds()), "added-p50-µs")
		}
	})
	// The same run POSTed with Accept: text/event-stream: its events come
	// in the POST's response, as a model API streams, with no second
	// request (runstream.go).
	var streamed []time.Duration
	b.Run("post-sse", func(b *testing.B) {
		for b.Loop() {
			sid := session()
			start := time.Now()
			res, err := r.postRun(ctx, r.alice, sid, map[string]any{"prompt": "read"})
			if err != nil {
				b.Fatal(err)
			}
			evs, err := readSSE(res.Body, func(e sseEvent) bool { return e.typ == "run.completed" })
			if err != nil || res.StatusCode != 200 || len(evs) == 0 || evs[len(evs)-1].typ != "run.completed" {
				b.Fatalf("streaming run: %d, %d events, %v", res.StatusCode, len(evs), err)
			}
			// Measured to run.completed, as http-sse is; the response's
			// end (the server's access log line, the last chunk) follows,
			// read untimed so the connection serves the next run.
			streamed = append(streamed, time.Since(start))
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if long {
				r.waitStatus(r.alice, sid, "idle")
			}
		}
		b.ReportMetric(float64(median(streamed).Microseconds()), "p50-µs")
		if len(inproc) > 0 {
			b.ReportMetric(float64((median(streamed) - median(inproc)).Microseconds()), "added-p50-µs")
		}
	})
}

// BenchmarkEventsPerSecond: a run of many small text deltas, streamed to
// 1 client and to 200 clients at once; events/s counts events delivered.
func BenchmarkEventsPerSecond(b *testing.B) {
	words := strings.Repeat("word ", 2000)
	script := "steps:\n  - text: \"" + words + "\"\n"
	for _, clients := range []int{1, 200} {
		b.Run(strconv.Itoa(clients)+"-clients", func(b *testing.B) {
			r := newRigB(b, script, serve.Limits{MaxStreams: 1000})
			ctx := context.Background()
			var delivered int64
			var elapsed time.Duration
			for b.Loop() {
				sid := r.newSession(r.alice)
				var wg sync.WaitGroup
				var mu sync.Mutex
				ready := make(chan struct{}, clients)
				for range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						req, _ := http.NewRequestWithContext(ctx, "GET", r.url+"/v1/sessions/"+sid+"/events", nil)
						req.Header.Set("Authorization", "Bearer "+r.alice)
						res, err := http.DefaultClient.Do(req)
						if err != nil {
							b.Error(err)
							ready <- struct{}{}
							return
						}
						defer res.Body.Close()
						ready <- struct{}{}
						evs, _ := readSSE(res.Body, func(e sseEvent) bool { return e.typ == "run.completed" })
						mu.Lock()
						delivered += int64(len(evs))
						mu.Unlock()
					}()
				}
				for range clients {
					<-ready
				}
				start := time.Now()
				if p := r.doNoCheck("POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "talk"}); p.status != 202 {
					b.Fatalf("run: %d %s", p.status, p.body)
				}
				wg.Wait()
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(delivered)/elapsed.Seconds(), "events/s")
		})
	}
}

// BenchmarkRSS reports the process's resident memory with 1,000 idle
// sessions, then with 200 runs in flight (each waiting in a tool), each
// with a stream open.
func BenchmarkRSS(b *testing.B) {
	for b.Loop() {
		gate := make(chan struct{})
		script := "steps:\n  - text: \"" + strings.Repeat("x ", 200) + "\"\n    tool_calls:\n      - name: gate\n        args: {}\n  - text: done\n"
		r := newRigBTools(b, script, serve.Limits{MaxRuns: 300, MaxRunsPerKey: 300, MaxStreams: 1000}, []kernel.Tool{gateTool("gate", gate, nil)})
		base := rssMiB()
		for range 1000 {
			r.newSession(r.alice)
		}
		idle := rssMiB()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 200 {
			sid := r.newSession(r.alice)
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.stream(ctx, r.alice, sid, "", func(e sseEvent) bool { return e.typ == "run.completed" })
			}()
			if p := r.doNoCheck("POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "wait"}); p.status != 202 {
				b.Fatalf("run: %d %s", p.status, p.body)
			}
		}
		for r.srv.Stats().Runs < 200 || r.srv.Stats().Streams < 200 {
			time.Sleep(10 * time.Millisecond)
		}
		running := rssMiB()
		close(gate)
		wg.Wait()
		cancel()
		b.ReportMetric(base, "rss-base-MiB")
		b.ReportMetric(idle, "rss-1000-idle-MiB")
		b.ReportMetric(running, "rss-200-running-MiB")
	}
}

// BenchmarkDrain: SIGTERM's drain with 50 runs in flight, each in a tool
// call: the time from the drain's start until Serve returns (the calls
// return as the drain starts; each run stores its round, stops at the
// boundary as interrupted, and its events are flushed).
func BenchmarkDrain(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		gate := make(chan struct{})
		entered := make(chan struct{}, 64)
		tool := gateTool("gate", gate, entered)
		r := newRigBTools(b, "steps:\n  - tool_calls:\n      - name: gate\n        args: {}\n  - text: done\n",
			serve.Limits{MaxRuns: 100, MaxRunsPerKey: 100}, []kernel.Tool{tool})
		for range 50 {
			sid := r.newSession(r.alice)
			if p := r.doNoCheck("POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "go"}); p.status != 202 {
				b.Fatalf("run: %d %s", p.status, p.body)
			}
		}
		for range 50 {
			<-entered
		}
		b.StartTimer()
		start := time.Now()
		stopped := make(chan error, 1)
		go func() { stopped <- r.stop() }()
		for { // the listener closed: the runs have been told
			res, err := http.Get(r.url + "/healthz")
			if err != nil {
				break
			}
			res.Body.Close()
		}
		close(gate)
		if err := <-stopped; err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "drain-ms")
	}
}

func newRigB(b *testing.B, script string, lim serve.Limits) *rig {
	return newRigBTools(b, script, lim, nil)
}

func newRigBTools(b *testing.B, script string, lim serve.Limits, tools []kernel.Tool) *rig {
	return newRigTB(b, rigOpts{script: script, limits: lim, tools: tools, badger: filepath.Join(b.TempDir(), "store")})
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// rssMiB is the resident set size of this process, from /proc.
func rssMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}
