package policy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/policy"
)

// makePolicy is a policy whose revision is rev and which denies make when
// deny is set.
func makePolicy(rev string, deny bool) string {
	effect := "allow"
	decision := "allow"
	if deny {
		effect, decision = "deny", "deny"
	}
	return fmt.Sprintf(`name: reload
revision: %q
defaults: {tool_call: allow}
rules:
  - id: make
    effect: %s
    tools: [run_command]
    when: call.argv[0] == "make"
    message: '"make is %s"'
tests:
  - name: make
    input: {call: {tool: run_command, args: {argv: [make]}}}
    expect: {decision: %s, rules: [make]}
`, rev, effect, effect, decision)
}

const brokenPolicy = `name: reload
revision: "broken"
defaults: {tool_call: allow}
rules:
  - id: make
    effect: allow
    when: tool.nmae == "run_command"
`

type reloads struct {
	ch chan policy.ReloadEvent
}

func newReloads() *reloads { return &reloads{ch: make(chan policy.ReloadEvent, 16)} }

func (r *reloads) on(e policy.ReloadEvent) { r.ch <- e }

// next waits for the next reload report.
func (r *reloads) next(t *testing.T) policy.ReloadEvent {
	t.Helper()
	select {
	case e := <-r.ch:
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no reload was reported")
	}
	return policy.ReloadEvent{}
}

func runMake(t *testing.T, h *harness) kernel.CallRecord {
	t.Helper()
	res, err := h.k.Run(context.Background(), "", "build")
	if err != nil {
		t.Fatal(err)
	}
	return res.Calls[0]
}

func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".swp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestWatcherHotReloadUnderKernel(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(path, []byte(makePolicy("1", false)), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := newWorkspace(t)
	rl := newReloads()
	w, err := policy.NewWatcher(context.Background(), policy.WatcherConfig{Path: path, Options: policy.Options{Tools: ws.reg.Specs()}, OnReload: rl.on, Debounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var replies []kerneltest.Reply
	for range 5 {
		replies = append(replies, kerneltest.Calls("run_command", map[string]any{"argv": []string{"make"}}), kerneltest.Text("ok"))
	}
	h := newHarness(t, ws, w, kernel.Config{}, replies...)

	if c := runMake(t, h); c.Outcome != kernel.OutcomeOK || c.Decision.Revision != "1" {
		t.Fatalf("under revision 1: %+v", c)
	}

	// Rewrite in place: the next decision, same kernel, uses revision 2.
	if err := os.WriteFile(path, []byte(makePolicy("2", true)), 0o600); err != nil {
		t.Fatal(err)
	}
	if e := rl.next(t); e.Err != nil || e.Revision != "2" || e.Trigger != "file" {
		t.Fatalf("reload = %+v", e)
	}
	if c := runMake(t, h); c.Outcome != kernel.OutcomeDenied || c.Decision.Revision != "2" || c.Decision.Rules[0] != "make" {
		t.Fatalf("under revision 2: %+v", c)
	}

	// A broken rewrite is reported with its line and column and changes
	// nothing.
	if err := os.WriteFile(path, []byte(brokenPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	e := rl.next(t)
	if e.Err == nil || !errors.Is(e.Err, policy.ErrCompile) || !strings.Contains(e.Err.Error(), "policy.yaml:7:16: rule \"make\": when: tool has no field nmae") {
		t.Fatalf("broken reload = %+v", e)
	}
	if e.Revision != "2" || e.Event().Error == "" || e.Event().What != "policy" {
		t.Fatalf("broken reload reports revision %q, event %+v", e.Revision, e.Event())
	}
	if c := runMake(t, h); c.Outcome != kernel.OutcomeDenied || c.Decision.Revision != "2" {
		t.Fatalf("after a broken rewrite: %+v", c)
	}

	// Restoring the good file is reported too, though the policy in force
	// does not change.
	if err := os.WriteFile(path, []byte(makePolicy("2", true)), 0o600); err != nil {
		t.Fatal(err)
	}
	if e := rl.next(t); e.Err != nil || e.Revision != "2" {
		t.Fatalf("restore = %+v", e)
	}

	// An editor that writes a new file and renames it over the old one.
	writeAtomically(t, path, makePolicy("3", false))
	if e := rl.next(t); e.Err != nil || e.Revision != "3" {
		t.Fatalf("rename reload = %+v", e)
	}
	if c := runMake(t, h); c.Outcome != kernel.OutcomeOK || c.Decision.Revision != "3" {
		t.Fatalf("under revision 3: %+v", c)
	}
}

func TestWatcherReloadOnRequest(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(path, []byte(makePolicy("1", false)), 0o600); err != nil {
		t.Fatal(err)
	}
	rl := newReloads()
	w, err := policy.NewWatcher(context.Background(), policy.WatcherConfig{Path: path, OnReload: rl.on})
	if err != nil {
		t.Fatal(err)
	}
	// Not started: only Reload picks up changes (the CLI calls it on SIGHUP).
	if err := os.WriteFile(path, []byte(brokenPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.Reload(context.Background()); !errors.Is(err, policy.ErrCompile) {
		t.Fatalf("Reload of a broken file = %v", err)
	}
	if e := rl.next(t); e.Err == nil || e.Trigger != "request" || w.Policy().Revision() != "1" {
		t.Fatalf("report = %+v, revision %s", e, w.Policy().Revision())
	}
	if err := os.WriteFile(path, []byte(makePolicy("2", true)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e := rl.next(t); e.Err != nil || e.Revision != "2" || w.Policy().Revision() != "2" {
		t.Fatalf("report = %+v", e)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); !errors.Is(err, policy.ErrWatcherClosed) {
		t.Fatalf("Start after Close = %v", err)
	}
}

func TestNewWatcherRefusesABadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte(brokenPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := policy.NewWatcher(context.Background(), policy.WatcherConfig{Path: path}); !errors.Is(err, policy.ErrCompile) {
		t.Fatalf("NewWatcher = %v", err)
	}
	if _, err := policy.NewWatcher(context.Background(), policy.WatcherConfig{Path: filepath.Join(t.TempDir(), "missing.yaml")}); err == nil {
		t.Fatal("NewWatcher of a missing file succeeded")
	}
}

// TestWatcherHammer decides concurrently while the policy is swapped back
// and forth; under -race it proves the swap is safe, and every decision
// comes from one whole policy (its revision matches its verdict).
func TestWatcherHammer(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(path, []byte(makePolicy("allow", false)), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := policy.NewWatcher(context.Background(), policy.WatcherConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	spec := policy.BuiltinSpecs()[5]
	st := &kernel.State{Run: 1, Turn: 1, ToolCounts: map[string]int{}}
	call, err := kernel.NewCall("c1", spec, []byte(`{"argv":["make"]}`), st)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				d := w.Decide(context.Background(), st, call)
				if (d.Revision == "allow") != (d.Effect == kernel.EffectAllow) {
					errs <- fmt.Errorf("revision %s decided %s", d.Revision, d.Effect)
					return
				}
			}
		}()
	}
	for i := range 20 {
		deny := i%2 == 0
		rev := "allow"
		if deny {
			rev = "deny"
		}
		if err := os.WriteFile(path, []byte(makePolicy(rev, deny)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := w.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
