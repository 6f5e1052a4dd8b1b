package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/badger"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
)

// The benchmarks compare the postgres store with the badger store, side
// by side in one run, both durable: Badger syncs every commit, and the
// benchmarks' PostgreSQL server runs with fsync on (pgtest.Options.Durable),
// on the same disk.

var (
	benchDSN    string
	durableOnce sync.Once
	durable     *pgtest.Server
	durableErr  error
)

func durableServer(b *testing.B) *pgtest.Server {
	durableOnce.Do(func() { durable, durableErr = pgtest.Start(pgtest.Options{Durable: true}) })
	if durableErr != nil {
		pgtest.Shared(b)
		b.Fatal(durableErr)
	}
	return durable
}

// benchStores opens each kind of store, empty, closed when b ends; the
// postgres one's DSN is benchDSN.
func benchStores(b *testing.B) map[string]kernel.Store {
	b.Helper()
	bs, err := badger.Open(filepath.Join(b.TempDir(), "store"), badger.Options{Server: true, GCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bs.Close() })
	srv := durableServer(b)
	benchDSN = srv.Migrated(b)
	ps, err := postgres.Open(context.Background(), benchDSN, postgres.Options{MaxConns: 40})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ps.Close() })
	return map[string]kernel.Store{"badger": bs, "postgres": ps}
}

// benchMessage is a step of the size an assistant message with a tool
// call has (about 600 bytes).
func benchMessage(seq int) kernel.Message {
	return kernel.Message{Seq: uint64(seq), Role: kernel.RoleAssistant, Content: strings.Repeat("words ", 60), Model: "m",
		ToolCalls: []kernel.ToolCall{{ID: fmt.Sprint("call_", seq), Name: "read_file", Arguments: `{"path":"internal/store/session.go"}`}},
		Time:      time.Now()}
}

// BenchmarkStepWrite commits one-message steps from 1, 8 and 32 sessions
// at once, each writer its own session (the kernel's pattern: a session
// has one writer), and reports the step latency's p50 and p99 and the
// steps per second of all writers together.
func BenchmarkStepWrite(b *testing.B) {
	for _, writers := range []int{1, 8, 32} {
		for _, kind := range []string{"badger", "postgres"} {
			b.Run(fmt.Sprintf("%s/sessions=%d", kind, writers), func(b *testing.B) {
				st := benchStores(b)[kind]
				ctx := context.Background()
				meta := kernel.SessionMeta{Status: kernel.StatusRunning, Model: "m", Created: time.Now()}
				var wal0 int64
				if kind == "postgres" {
					wal0 = pgStat(b, "SELECT pg_current_wal_lsn() - '0/0'")
				}
				lat := make([][]time.Duration, writers)
				per := max(1, b.N/writers)
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for w := range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						id := fmt.Sprintf("w%d", w)
						lat[w] = make([]time.Duration, 0, per)
						for i := 1; i <= per; i++ {
							m := meta
							m.Updated = time.Now()
							t0 := time.Now()
							if err := st.Commit(ctx, id, kernel.Step{Messages: []kernel.Message{benchMessage(i)}, Meta: m}); err != nil {
								b.Error(err)
								return
							}
							lat[w] = append(lat[w], time.Since(t0))
						}
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				all := slices.Concat(lat...)
				slices.Sort(all)
				if len(all) == 0 {
					return
				}
				b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(all[min(len(all)-1, len(all)*99/100)].Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(len(all))/elapsed.Seconds(), "steps/s")
				if kind == "postgres" {
					// What a step costs the database: WAL written, and
					// the messages' tables' size per stored message (the
					// rows and, from schema version 5, the segments).
					b.ReportMetric(float64(pgStat(b, "SELECT pg_current_wal_lsn() - '0/0'")-wal0)/float64(len(all)), "wal-B/step")
					b.ReportMetric(float64(pgStat(b, "SELECT pg_total_relation_size('ak_messages') + coalesce(pg_total_relation_size(to_regclass('ak_segments')), 0)"))/float64(len(all)), "disk-B/msg")
				}
			})
		}
	}
}

// BenchmarkResume10k loads a session of 10,000 messages (a prompt, then
// rounds of an assistant message with a call and its result), as a
// resume does, and reports the time of one load, the CPU time it cost
// this process (cpu-ns/op) and, on PostgreSQL, the CPU time it cost the
// server's backends (server-cpu-ns/op): on a shared machine the CPU time
// measures the load, where the wall time also measures the neighbours.
func BenchmarkResume10k(b *testing.B) {
	for _, kind := range []string{"badger", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			st := benchStores(b)[kind]
			ctx := context.Background()
			const n = 10000
			msgs := make([]kernel.Message, 0, 500)
			seq := 0
			for seq < n {
				msgs = msgs[:0]
				for len(msgs) < 500 && seq < n {
					seq++
					m := benchMessage(seq)
					if seq%2 == 0 {
						m = kernel.Message{Seq: uint64(seq), Role: kernel.RoleTool, ToolCallID: fmt.Sprint("call_", seq-1), ToolName: "read_file",
							Content: strings.Repeat("file text ", 30), Time: time.Now()}
					}
					msgs = append(msgs, m)
				}
				if err := st.Commit(ctx, "big", kernel.Step{Messages: msgs, Meta: kernel.SessionMeta{Status: kernel.StatusIdle, Updated: time.Now()}}); err != nil {
					b.Fatal(err)
				}
			}
			var srv0 time.Duration
			if kind == "postgres" {
				srv0 = backendCPU(b)
			}
			b.ResetTimer()
			cpu0 := testutil.CPUTime()
			for range b.N {
				se, err := st.Load(ctx, "big")
				if err != nil || len(se.Messages) != n {
					b.Fatalf("load: %d messages, %v", len(se.Messages), err)
				}
			}
			b.ReportMetric(float64(testutil.CPUTime()-cpu0)/float64(b.N), "cpu-ns/op")
			if kind == "postgres" {
				b.ReportMetric(float64(backendCPU(b)-srv0)/float64(b.N), "server-cpu-ns/op")
			}
		})
	}
}

// backendCPU is the CPU time (user and system, from /proc) of the server
// processes connected to the benchmark's database, the one asking
// excluded. The pool's connections live through the benchmark, so the
// difference of two readings is what the statements between them cost.
func backendCPU(b *testing.B) time.Duration {
	b.Helper()
	c, err := pgx.Connect(context.Background(), benchDSN)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, err := c.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // it ended meanwhile
		}
		// utime and stime are fields 14 and 15, in clock ticks (100 a
		// second on Linux), after the command name in parentheses.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 13 {
			b.Fatalf("/proc/%d/stat: %q", pid, stat)
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		sy, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(u+sy) * 10 * time.Millisecond
	}
	return total
}

// pgStat runs a query of one number on the benchmark's database.
func pgStat(b *testing.B, sql string) int64 {
	b.Helper()
	c, err := pgx.Connect(context.Background(), benchDSN)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	var n float64
	if err := c.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return int64(n)
}

// BenchmarkToolRound runs one session through the kernel, round after
// round of one tool call (the model and the tool answer at once), on each
// store, durable, with the session's lease held on PostgreSQL as kernel
// serve holds it. A round is the assistant message, the call and its
// results; a side-effecting call adds its intent, one more write before
// it runs (intent.go). It reports the round's p50 and p99 (from one
// stored assistant message to the next) and the writes per round: the
// difference between the two tiers is what fencing side effects costs.
func BenchmarkToolRound(b *testing.B) {
	for _, kind := range []string{"badger", "postgres"} {
		for _, tier := range []kernel.Tier{kernel.TierReadOnly, kernel.TierSideEffecting} {
			b.Run(fmt.Sprintf("%s/%s", kind, tier), func(b *testing.B) {
				st := &counting{Store: benchStores(b)[kind]}
				ctx := context.Background()
				tool := kernel.NewTool(kernel.ToolSpec{Name: "t", Description: "does nothing", Tier: tier, Source: "bench",
					Schema: []byte(`{"type":"object"}`)}, func(context.Context, json.RawMessage) (kernel.Result, error) {
					return kernel.Result{Content: "done"}, nil
				})
				reg := kernel.NewRegistry()
				if err := reg.Register(tool); err != nil {
					b.Fatal(err)
				}
				replies := make([]kerneltest.Reply, 0, b.N+1)
				for range b.N {
					replies = append(replies, kerneltest.Calls("t", `{}`))
				}
				replies = append(replies, kerneltest.Text("done"))
				var stamps []time.Time
				k, err := kernel.New(kernel.Config{Store: st, Tools: reg, Provider: kerneltest.NewProvider(replies...), MaxTurns: b.N + 1,
					OnEvent: func(e kernel.Event) {
						if _, ok := e.(kernel.MessageCompleted); ok {
							stamps = append(stamps, time.Now())
						}
					}})
				if err != nil {
					b.Fatal(err)
				}
				if err := st.Commit(ctx, "s", kernel.Step{Meta: kernel.SessionMeta{Status: kernel.StatusIdle, Created: time.Now()}}); err != nil {
					b.Fatal(err)
				}
				var opts kernel.RunOptions
				if l, ok := st.Store.(kernel.Leaser); ok {
					h, err := kernel.HoldLease(ctx, l, "s", "bench", time.Minute)
					if err != nil {
						b.Fatal(err)
					}
					defer h.Release(ctx)
					opts.Lease = h
				}
				st.n.Store(0)
				b.ResetTimer()
				if _, err := k.With(opts).Run(ctx, "s", "go"); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				var lat []time.Duration
				for i := 1; i < len(stamps); i++ {
					lat = append(lat, stamps[i].Sub(stamps[i-1]))
				}
				if len(lat) == 0 {
					return
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(st.n.Load())/float64(b.N), "writes/round")
			})
		}
	}
}

// counting is a store that counts its commits.
type counting struct {
	kernel.Store
	n atomic.Int64
}

func (c *counting) Commit(ctx context.Context, id string, step kernel.Step) error {
	c.n.Add(1)
	return c.Store.Commit(ctx, id, step)
}

// BenchmarkHeadRead: kernel serve's ownership check (a run's 202, a
// stream's start) as a whole Load against LoadHead, on a session of 1
// message and one of 500. The 500 messages are rows (no segment): the
// benchmark's session grew one step at a time, as a served one does.
func BenchmarkHeadRead(b *testing.B) {
	s := benchStores(b)["postgres"].(*postgres.Store)
	ctx := context.Background()
	meta := kernel.SessionMeta{Status: kernel.StatusIdle, Created: time.Now(), Updated: time.Now(), Labels: map[string]string{"owner": "key_3f9a2c"}}
	for _, c := range []struct {
		id string
		n  int
	}{{"one", 1}, {"long", 500}} {
		for i := 1; i <= c.n; i += 50 {
			var msgs []kernel.Message
			for j := i; j < i+50 && j <= c.n; j++ {
				msgs = append(msgs, benchMessage(j))
			}
			if err := s.Commit(ctx, c.id, kernel.Step{Messages: msgs, Meta: meta}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("messages=%d/load", c.n), func(b *testing.B) {
			for b.Loop() {
				if se, err := s.Load(ctx, c.id); err != nil || len(se.Messages) != c.n {
					b.Fatalf("Load = %v", err)
				}
			}
		})
		b.Run(fmt.Sprintf("messages=%d/head", c.n), func(b *testing.B) {
			for b.Loop() {
				if se, err := s.LoadHead(ctx, c.id); err != nil || se.Meta.LastSeq != uint64(c.n) {
					b.Fatalf("LoadHead = %v", err)
				}
			}
		})
	}
}
