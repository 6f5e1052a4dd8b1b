package badger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// BenchmarkLsWhileWriting is `kernel sessions ls` (a read-only Open, List,
// Close) on a store of 10, 100 and 1,000 sessions of 20 messages while a
// writer holds it: through the writer's socket, and through a snapshot
// copy (what a reader does when no writer answers).
func BenchmarkLsWhileWriting(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{10, 100, 1000} {
		dir := b.TempDir()
		w := openAt(b, dir, Options{})
		msgs := benchMessages(20)
		for i := range n {
			if err := w.Commit(ctx, fmt.Sprintf("s%04d", i), kernel.Step{Messages: msgs, Meta: kernel.SessionMeta{Updated: time.Now()}}); err != nil {
				b.Fatal(err)
			}
		}
		for _, mode := range []string{"socket", "snapshot"} {
			b.Run(fmt.Sprintf("sessions=%d/%s", n, mode), func(b *testing.B) {
				noSocket = mode == "snapshot"
				defer func() { noSocket = false }()
				bytes, files := StoreSize(dir)
				b.ReportMetric(float64(bytes)/(1<<20), "store-MiB")
				b.ReportMetric(float64(files), "store-files")
				for i := 0; i < b.N; i++ {
					s, err := Open(dir, Options{ReadOnly: true, Logger: quietLogger()})
					if err != nil {
						b.Fatal(err)
					}
					l, err := s.List(ctx)
					if err != nil || len(l) != n {
						b.Fatal(len(l), err)
					}
					if err := s.Close(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenAfterRuns is a writer's Open+Close after 10 and 300
// processes each opened the store, committed a run with one large value
// (value log) and some small ones, and closed it: open latency over time,
// and the store's files.
func BenchmarkOpenAfterRuns(b *testing.B) {
	ctx := context.Background()
	for _, runs := range []int{10, 300} {
		dir := b.TempDir()
		for r := range runs {
			s, err := Open(dir, Options{Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			msgs := benchMessages(8)
			msgs[3].Content = string(make([]byte, 40<<10))
			if err := s.Commit(ctx, fmt.Sprintf("r%04d", r), kernel.Step{Messages: msgs, Meta: kernel.SessionMeta{Updated: time.Now()}}); err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("runs=%d", runs), func(b *testing.B) {
			bytes, files := StoreSize(dir)
			b.ReportMetric(float64(bytes)/(1<<20), "store-MiB")
			b.ReportMetric(float64(files), "store-files")
			for i := 0; i < b.N; i++ {
				s, err := Open(dir, Options{Logger: quietLogger()})
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
