package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// TestAttacks runs every misbehaving tool of the attack fixture, as a json
// command and as a pooled reactor: each is stopped or refused with the
// right error, and the next call to the same module succeeds. Only the
// runaway ones (loop, sleep, stdin) get a 500ms deadline from the caller;
// the others must be stopped by their own limit, so they run under the
// module's timeout, left minutes long: under -race on a loaded machine a
// guest can take seconds to fill 32 MiB, and a deadline it could reach
// first would report the wrong cause (TestRecursionBomb covers the
// module's timeout). They run one after another: spinning guests in
// parallel on two cores would only measure the scheduler.
func TestAttacks(t *testing.T) {
	grants := Grants{Timeout: Duration(3 * time.Minute), MemoryMB: 32, MaxOutputBytes: 64 << 10, Clock: true}
	h := newTestHost(t)
	jsonTools, _ := load(t, h, ModuleConfig{Path: attackWasm, Grants: grants})
	reactorTools, _ := load(t, h, ModuleConfig{Path: reactorWasm, Pool: 2, Grants: grants})
	modules := []struct {
		abi   string
		tools loaded
	}{{"json", jsonTools}, {"reactor", reactorTools}}

	for _, tc := range []struct {
		tool     string
		code     string // kernel.ToolError code
		sentinel error
		mention  string
		runaway  bool // stopped by the caller's deadline, not a limit
	}{
		{tool: "loop", code: "timeout", sentinel: kernel.ErrToolTimeout, runaway: true},
		{tool: "sleep", code: "timeout", sentinel: kernel.ErrToolTimeout, runaway: true},
		{tool: "stdin", code: "timeout", sentinel: kernel.ErrToolTimeout, runaway: true},
		{tool: "memory", code: "memory_limit", sentinel: ErrMemoryLimit, mention: "32 MiB"},
		{tool: "stdout_flood", code: "output_limit", sentinel: ErrOutputLimit, mention: "stdout is over 65536 bytes"},
		{tool: "stderr_flood", code: "output_limit", sentinel: ErrOutputLimit, mention: "stderr is over 65536 bytes"},
		{tool: "exit", code: "exit", mention: "exiting on purpose with code 7"},
	} {
		for _, mod := range modules {
			tools := mod.tools
			t.Run(mod.abi+"/"+tc.tool, func(t *testing.T) {
				args := `{}`
				if tc.tool == "exit" {
					args = `{"code": 7}`
				}
				ctx, cancel := context.WithCancel(context.Background())
				if tc.runaway {
					ctx, cancel = context.WithTimeout(ctx, 500*time.Millisecond)
				}
				defer cancel()
				start := time.Now()
				res, err := callWithin(ctx, t, tools[tc.tool], args, 4*time.Minute)
				te := toolError(t, err)
				if te.Code != tc.code {
					t.Fatalf("code %q (%v) after %s, want %q", te.Code, err, time.Since(start), tc.code)
				}
				if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
					t.Errorf("error %v does not wrap %v", err, tc.sentinel)
				}
				if !res.IsError || !strings.Contains(res.Content, tc.mention) || !strings.Contains(err.Error(), tc.mention) {
					t.Errorf("result %q / error %q should be an error mentioning %q", res.Content, err, tc.mention)
				}
				if got := tools.mustCall(t, "echo", `{"text":"still healthy"}`); got != "still healthy" {
					t.Fatalf("call after the attack returned %q", got)
				}
			})
		}
	}
}

// callWithin calls a tool and fails the test if it does not return in
// limit, far longer than any deadline in these tests.
func callWithin(ctx context.Context, t *testing.T, tl kernel.Tool, args string, limit time.Duration) (kernel.Result, error) {
	t.Helper()
	type out struct {
		res kernel.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := tl.Call(ctx, json.RawMessage(args))
		done <- out{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-time.After(limit):
		t.Fatalf("%s did not return within %s", tl.Spec().Name, limit)
		return kernel.Result{}, nil
	}
}

// TestSleepWithoutClock: without the clock grant the guest's clock is fake
// and sleeping returns at once, so an hour-long sleep either finishes in
// fake time or is stopped at the deadline, and never holds the host.
func TestSleepWithoutClock(t *testing.T) {
	tools := attackTools(t)
	res, err := callWithin(context.Background(), t, tools["sleep"], `{}`, 30*time.Second)
	if err != nil {
		if te := toolError(t, err); te.Code != "timeout" {
			t.Fatalf("code %q (%v), want timeout", te.Code, err)
		}
	} else if res.Content != "woke up after an hour" {
		t.Fatalf("result %q", res.Content)
	}
	tools.mustCall(t, "echo", `{"text":"x"}`)
}

// TestCancellation: cancelling the caller's context stops a runaway guest
// as promptly as a deadline, reported as cancelled.
func TestCancellation(t *testing.T) {
	tools := attackTools(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := tools["loop"].Call(ctx, json.RawMessage(`{}`))
	te := toolError(t, err)
	if te.Code != "cancelled" || !errors.Is(err, kernel.ErrCancelled) {
		t.Fatalf("code %q (%v), want cancelled", te.Code, err)
	}
}

func TestGuestPanicIsAToolResult(t *testing.T) {
	tools := attackTools(t)
	res, err := tools.call(t, "panic", `{}`)
	if err != nil || !res.IsError || !strings.Contains(res.Content, "panicked: assignment to entry in nil map") {
		t.Fatalf("result %+v, error %v; want an is_error result from the sdk", res, err)
	}
}

// TestNoStateBetweenCalls: concurrent calls of a tool that increments
// package state all see a fresh instance, for a json command and for a
// pooled reactor. Go runtimes starting at once under -race on two busy
// cores take seconds each, so the calls get minutes: this test is about
// state, not speed.
//
// noStateCalls is six times the reactor's pool of 4: every ready instance
// is taken and refilled several times over, so an instance served twice
// (kept after its call, or handed to two calls) answers 2. It was 100;
// each call starts a Go runtime (~35 ms of CPU under -race), and the
// extra calls added load, not cases: many callers at once on a small pool
// is TestFiftyParallelCalls's (50 calls, pool 2).
const noStateCalls = 24

func TestNoStateBetweenCalls(t *testing.T) {
	h := newTestHost(t)
	grants := Grants{Timeout: Duration(5 * time.Minute)}
	for _, mc := range []ModuleConfig{
		{Path: attackWasm, Grants: grants},
		{Path: reactorWasm, Pool: 4, Grants: grants},
	} {
		t.Run(filepathBase(mc.Path), func(t *testing.T) {
			tools, _ := load(t, h, mc)
			var wg sync.WaitGroup
			results := make([]string, noStateCalls)
			errs := make([]error, noStateCalls)
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := tools["counter"].Call(context.Background(), json.RawMessage(`{}`))
					results[i], errs[i] = res.Content, err
				}()
			}
			wg.Wait()
			for i := range results {
				if errs[i] != nil || results[i] != "1" {
					t.Fatalf("call %d: %q, %v; want 1 (a fresh instance)", i, results[i], errs[i])
				}
			}
		})
	}
}

func filepathBase(p string) string { return p[strings.LastIndex(p, "/")+1:] }

// TestEnvironment: the guest sees exactly the granted variables the
// manifest asked for, none of the host's.
func TestEnvironment(t *testing.T) {
	t.Setenv("AK_HOST_SECRET", "do-not-leak")
	h := newTestHost(t)
	tools, warnings := load(t, h, ModuleConfig{Path: attackWasm, Grants: Grants{Env: map[string]string{
		"AK_VISIBLE": "granted value", "AK_UNREQUESTED": "ignored",
	}}})
	if got := tools.mustCall(t, "env", `{}`); got != "AK_VISIBLE=granted value" {
		t.Fatalf("environment %q, want only AK_VISIBLE", got)
	}
	if got := tools.mustCall(t, "args", `{}`); got != "attack" {
		t.Fatalf("argv %q, want just the module name", got)
	}
	want := []string{"env AK_NOT_GRANTED requested but not granted", "grant env AK_UNREQUESTED is not requested"}
	for _, w := range want {
		if !containsAny(warnings, w) {
			t.Errorf("warnings %q lack %q", warnings, w)
		}
	}
}

func containsAny(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestClockAndRandom: without grants the clock is wazero's fake one and
// randomness is the same deterministic stream in every call; with grants
// both are real.
func TestClockAndRandom(t *testing.T) {
	h := newTestHost(t)
	denied, _ := load(t, h, ModuleConfig{Path: attackWasm})
	granted, _ := load(t, h, ModuleConfig{Path: attackWasm, Grants: Grants{Clock: true, Random: true}})

	type clock struct {
		UnixNS  int64 `json:"unix_ns"`
		SleptNS int64 `json:"slept_ns"`
	}
	read := func(l loaded) clock {
		var c clock
		if err := json.Unmarshal([]byte(l.mustCall(t, "clock", `{}`)), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	fake, real := read(denied), read(granted)
	fakeEpoch := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := time.Unix(0, fake.UnixNS); got.Before(fakeEpoch) || got.After(fakeEpoch.Add(time.Hour)) {
		t.Errorf("without the clock grant the guest read %s; want wazero's fake epoch (2022-01-01)", got)
	}
	if got := time.Unix(0, real.UnixNS); time.Since(got) > time.Hour || real.SleptNS < int64(20*time.Millisecond) {
		t.Errorf("with the clock grant the guest read %s and slept %s; want now and >= 20ms", got, time.Duration(real.SleptNS))
	}

	r1, r2 := denied.mustCall(t, "random", `{}`), denied.mustCall(t, "random", `{}`)
	if r1 != r2 {
		t.Errorf("without the random grant two calls read %s and %s; want the same deterministic stream", r1, r2)
	}
	g1, g2 := granted.mustCall(t, "random", `{}`), granted.mustCall(t, "random", `{}`)
	if g1 == g2 || g1 == r1 {
		t.Errorf("with the random grant calls read %s, %s (denied: %s); want fresh randomness", g1, g2, r1)
	}
}

// TestResultOverLimit: a result larger than max_output_bytes is refused,
// not truncated, whether it arrives on stdout (json) or in guest memory
// (reactor); a result under the limit passes whole.
func TestResultOverLimit(t *testing.T) {
	h := newTestHost(t)
	grants := Grants{MaxOutputBytes: 64 << 10}
	for _, mc := range []ModuleConfig{{Path: attackWasm, Grants: grants}, {Path: reactorWasm, Grants: grants}} {
		t.Run(filepathBase(mc.Path), func(t *testing.T) {
			tools, _ := load(t, h, mc)
			if got := tools.mustCall(t, "big", `{"size": 60000}`); len(got) != 60000 {
				t.Fatalf("a 60000-byte result came back as %d bytes", len(got))
			}
			res, err := tools.call(t, "big", `{"size": 70000}`)
			if te := toolError(t, err); te.Code != "output_limit" || !errors.Is(err, ErrOutputLimit) || !res.IsError {
				t.Fatalf("%q (%v), want output_limit", te.Code, err)
			}
		})
	}
}
