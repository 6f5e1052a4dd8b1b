package policy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/policy"
)

// cancelAfter is a context that is cancelled at the n-th time the load
// asks it (Err), so a test can cancel at a chosen point of a load without
// depending on how fast the machine is. checks counts every question.
type cancelAfter struct {
	n      int64
	checks atomic.Int64
	once   sync.Once
	done   chan struct{}
}

func newCancelAfter(n int64) *cancelAfter { return &cancelAfter{n: n, done: make(chan struct{})} }

func (c *cancelAfter) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *cancelAfter) Value(any) any               { return nil }
func (c *cancelAfter) Done() <-chan struct{} {
	if c.checks.Load() >= c.n {
		c.once.Do(func() { close(c.done) })
	}
	return c.done
}
func (c *cancelAfter) Err() error {
	if c.checks.Add(1) >= c.n {
		c.once.Do(func() { close(c.done) })
		return context.Canceled
	}
	return nil
}

// TestLoadCancelled cancels loads of a large policy while it compiles and
// while it runs its tests: each returns the context's error, naming the
// file and the stage, and no policy.
func TestLoadCancelled(t *testing.T) {
	const rules = 300
	src := []byte(genLoadPolicy(rules))
	// How often a whole load asks: the compiler once per expression, the
	// tests once per 64 tests and at the end.
	count := newCancelAfter(1 << 62)
	if _, err := policy.Load(count, "big.yaml", src, policy.Options{}); err != nil {
		t.Fatal(err)
	}
	total := count.checks.Load()
	if total < rules+rules/64 {
		t.Fatalf("a load of %d rules asked its context %d times", rules, total)
	}
	for _, tc := range []struct {
		name  string
		after int64 // Err calls before the cancellation
		stage string
	}{
		{"before the start", 1, "cancelled while loading"},
		{"while compiling", 100, "cancelled while compiling"},
		// The tests ask every 64 tests and once at the end: the last
		// rules/64 questions are theirs.
		{"while testing", total - rules/64, "cancelled while testing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := newCancelAfter(tc.after)
			p, err := policy.Load(ctx, "big.yaml", src, policy.Options{})
			if p != nil || !errors.Is(err, context.Canceled) {
				t.Fatalf("Load = (policy: %t), %v; want no policy and context.Canceled", p != nil, err)
			}
			if !strings.Contains(err.Error(), "policy big.yaml: "+tc.stage) {
				t.Fatalf("error %q does not say %q", err, tc.stage)
			}
			var le *policy.LoadError
			if errors.As(err, &le) {
				t.Fatalf("a cancelled load reported problems with the file: %v", err)
			}
		})
	}
}

// TestEveryEntryPointCancels gives each cancellable entry point a
// cancelled context and a large file: each stops with context.Canceled.
func TestEveryEntryPointCancels(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, []byte(genLoadPolicy(500)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out strings.Builder
	calls := map[string]func() error{
		"LoadFile": func() error { _, err := policy.LoadFile(ctx, path, policy.Options{}); return err },
		"CompileFile": func() error {
			_, err := policy.CompileFile(ctx, path, policy.Options{})
			return err
		},
		"CheckFile": func() error { _, err := policy.CheckFile(ctx, path, policy.Options{}); return err },
		"TestFiles": func() error {
			_, err := policy.TestFiles(ctx, &out, []string{path}, policy.Options{}, false)
			return err
		},
		"NewWatcher": func() error {
			_, err := policy.NewWatcher(ctx, policy.WatcherConfig{Path: path})
			return err
		},
		"RunTests": func() error {
			p, err := policy.CompileFile(context.Background(), path, policy.Options{})
			if err != nil {
				return err
			}
			_, err = p.RunTests(ctx)
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err = %v, want context.Canceled", name, err)
		}
	}
	if out.Len() > 0 {
		t.Errorf("TestFiles wrote results of a cancelled run:\n%s", out.String())
	}
}

// TestReloadCancelled: a cancelled reload keeps the policy in force,
// reports the cancellation, and does not count as tried (the next reload
// of the same bytes loads them).
func TestReloadCancelled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	write := func(src string) {
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(strings.Replace(genLoadPolicy(20), `revision: "1"`, `revision: "old"`, 1))
	var events []policy.ReloadEvent
	w, err := policy.NewWatcher(context.Background(), policy.WatcherConfig{Path: path, OnReload: func(e policy.ReloadEvent) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	write(strings.Replace(genLoadPolicy(200), `revision: "1"`, `revision: "new"`, 1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Reload(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reload = %v, want context.Canceled", err)
	}
	if got := w.Policy().Revision(); got != "old" {
		t.Fatalf("after a cancelled reload the revision is %q, want old", got)
	}
	if len(events) != 1 || !errors.Is(events[0].Err, context.Canceled) || events[0].Revision != "old" {
		t.Fatalf("events = %+v", events)
	}
	if err := w.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := w.Policy().Revision(); got != "new" {
		t.Fatalf("revision = %q after reloading, want new", got)
	}
}
