package subprocess_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sdk"
)

type procInfo struct {
	PID     int    `json:"pid"`
	PGID    int    `json:"pgid"`
	PPID    int    `json:"ppid"`
	NS      string `json:"ns"`
	Started int64  `json:"started"`
}

func pidOf(t *testing.T, tools map[string]kernel.Tool) procInfo {
	t.Helper()
	var p procInfo
	if err := json.Unmarshal([]byte(mustCall(t, tools["mb.pid"], `{}`)), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPanicInHandlerIsReportedAndPluginLivesOn(t *testing.T) {
	h := newHost(t, subprocess.HostConfig{})
	tools := load(t, h, misbehaveConfig())
	before := pidOf(t, tools)

	res, err := call(t, tools["mb.panic"], `{"text":"boom in the handler"}`)
	var te *kernel.ToolError
	if !errors.As(err, &te) || te.Code != sdk.CodePanic || !errors.Is(err, sdk.ErrPanic) {
		t.Fatalf("err = %#v, want a ToolError with code panic", err)
	}
	if !strings.Contains(err.Error(), "panic: boom in the handler") || !strings.Contains(err.Error(), "main.go") {
		t.Errorf("error %q lacks the panic text and its stack", err)
	}
	if !res.IsError {
		t.Error("result not marked as an error")
	}
	if after := pidOf(t, tools); after.PID != before.PID {
		t.Errorf("a recovered panic restarted the plugin: pid %d -> %d", before.PID, after.PID)
	}
}

func TestCrashMidCallThenRestart(t *testing.T) {
	h := newHost(t, subprocess.HostConfig{})
	tools := load(t, h, misbehaveConfig())
	before := pidOf(t, tools)

	_, err := call(t, tools["mb.crash"], `{"text":"kaboom from a goroutine"}`)
	var te *kernel.ToolError
	if !errors.Is(err, subprocess.ErrCrashed) || !errors.As(err, &te) || te.Code != "crashed" {
		t.Fatalf("err = %v, want a crashed ToolError", err)
	}
	if !strings.Contains(err.Error(), "panic: kaboom from a goroutine") || !strings.Contains(err.Error(), "goroutine ") {
		t.Errorf("error %q lacks the plugin's panic text", err)
	}
	waitNSDead(t, 5*time.Second, before.NS)

	start := time.Now()
	if got := mustCall(t, tools["mb.echo"], `{"text":"back"}`); got != "back" {
		t.Fatalf("echo after crash = %q", got)
	}
	if d := time.Since(start); d < subprocess.DefaultBackoff/2 {
		t.Errorf("restart after %s: the backoff (%s) was not applied", d, subprocess.DefaultBackoff)
	}
	if after := pidOf(t, tools); after.Started == before.Started {
		t.Error("the plugin was not restarted")
	}
	if st := h.Status(); st[0].Crashes != 0 {
		t.Errorf("a successful call must reset the crash count: %+v", st)
	}
}

func TestCircuitBreaker(t *testing.T) {
	var mu sync.Mutex
	var notices []kernel.Notice
	h := newHost(t, subprocess.HostConfig{OnNotice: func(n kernel.Notice) {
		mu.Lock()
		notices = append(notices, n)
		mu.Unlock()
	}})
	cfg := misbehaveConfig()
	cooldown := 700 * time.Millisecond
	cfg.Restart = subprocess.RestartPolicy{MaxCrashes: 2, Backoff: subprocess.Duration(10 * time.Millisecond), Cooldown: subprocess.Duration(cooldown)}
	tools := load(t, h, cfg)

	for i := range 2 {
		if _, err := call(t, tools["mb.crash"], `{"text":"again"}`); !errors.Is(err, subprocess.ErrCrashed) {
			t.Fatalf("crash %d: %v", i, err)
		}
	}
	waitFor(t, 5*time.Second, func() bool { return h.Status()[0].Unavailable }, "the circuit to open")
	opened := time.Now()

	res, err := call(t, tools["mb.echo"], `{"text":"x"}`)
	var te *kernel.ToolError
	if !errors.Is(err, subprocess.ErrUnavailable) || !errors.As(err, &te) || te.Code != sdk.CodeUnavailable {
		t.Fatalf("call with the circuit open: %v, want unavailable", err)
	}
	if !strings.Contains(err.Error(), "crashed 2 times in a row") || res.Content != "" {
		t.Errorf("the model is not told why: %q", err)
	}
	mu.Lock()
	if len(notices) != 1 || notices[0].Level != "error" || notices[0].Source != "subprocess:mb" {
		t.Errorf("notices = %+v, want one error notice", notices)
	}
	mu.Unlock()

	time.Sleep(time.Until(opened.Add(cooldown + 50*time.Millisecond)))
	if got := mustCall(t, tools["mb.echo"], `{"text":"recovered"}`); got != "recovered" {
		t.Fatalf("echo after cooldown = %q", got)
	}
	if st := h.Status()[0]; st.Unavailable || st.Crashes != 0 {
		t.Errorf("status after recovery = %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(notices) != 2 || notices[1].Level != "info" {
		t.Errorf("notices = %+v, want an info notice on recovery", notices)
	}
}

// TestHangKilledAtDeadline: a call that ignores its deadline takes the
// plugin and its grandchild down with it; nothing is left behind, and the
// next call works.
func TestHangKilledAtDeadline(t *testing.T) {
	h := newHost(t, subprocess.HostConfig{})
	cfg := misbehaveConfig()
	// Long enough for the next call to restart the confined plugin on a
	// loaded machine: the deadline covers the start too.
	cfg.Timeout = subprocess.Duration(3 * time.Second)
	tools := load(t, h, cfg)
	if got := tools["mb.hang"].Spec().Timeout; got != 3*time.Second {
		t.Errorf("spec timeout = %s, want the configured 3s", got)
	}
	plugin := pidOf(t, tools)

	var grandchild int
	ctx := kernel.WithProgress(testCtx(t), func(text string) {
		if _, err := fmt.Sscanf(text, "grandchild %d", &grandchild); err != nil {
			t.Errorf("progress %q", text)
		}
	})
	start := time.Now()
	_, err := tools["mb.hang"].Call(ctx, []byte(`{}`))
	elapsed := time.Since(start)
	if !errors.Is(err, kernel.ErrToolTimeout) {
		t.Fatalf("err = %v, want kernel.ErrToolTimeout", err)
	}
	if elapsed < 3*time.Second || elapsed > 15*time.Second {
		t.Errorf("the call returned after %s, want about 3s", elapsed)
	}
	if grandchild == 0 {
		t.Fatal("no grandchild pid reported")
	}
	waitNSDead(t, 3*time.Second, plugin.NS)

	if got := mustCall(t, tools["mb.echo"], `{"text":"next"}`); got != "next" {
		t.Fatalf("echo after the hang = %q", got)
	}
	if st := h.Status()[0]; st.Crashes != 0 {
		t.Errorf("a deadline kill counted as a crash: %+v", st)
	}
}

func TestGrandchildrenKilledWithTheGroup(t *testing.T) {
	h := subprocess.NewHost(subprocess.HostConfig{})
	defer h.Close()
	tools := load(t, h, misbehaveConfig())
	plugin := pidOf(t, tools)
	var kids []int
	if err := json.Unmarshal([]byte(mustCall(t, tools["mb.spawn"], `{"count":3}`)), &kids); err != nil {
		t.Fatal(err)
	}
	if len(kids) != 3 {
		t.Fatalf("kids = %v", kids)
	}
	for _, k := range kids {
		if !nsAlive(plugin.NS, k) {
			t.Fatalf("grandchild %d is not running", k)
		}
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	waitNSDead(t, 3*time.Second, plugin.NS)
}

func TestConcurrentCalls(t *testing.T) {
	h := newHost(t, subprocess.HostConfig{})
	tools := load(t, h, misbehaveConfig())
	const n = 100
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := strings.Repeat(string(rune('a'+i%26)), i+1) + "-" + time.Now().Format(time.RFC3339Nano)
			args, _ := json.Marshal(map[string]string{"text": want})
			tool := tools["mb.echo"]
			var progress []string
			ctx := testCtx(t)
			if i%4 == 0 {
				tool = tools["mb.progress"]
				args = []byte(`{"count":3}`)
				want = "done"
				ctx = kernel.WithProgress(ctx, func(s string) { progress = append(progress, s) })
			}
			res, err := tool.Call(ctx, args)
			switch {
			case err != nil:
				errs[i] = err
			case res.Content != want:
				errs[i] = errors.New("got " + res.Content + ", want " + want)
			case i%4 == 0 && strings.Join(progress, ",") != "step 1/3,step 2/3,step 3/3":
				errs[i] = errors.New("progress " + strings.Join(progress, ","))
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
}

func TestErrorCodesCrossTheBoundary(t *testing.T) {
	h := newHost(t, subprocess.HostConfig{})
	tools := load(t, h, misbehaveConfig())
	for _, tc := range []struct {
		code   string
		target error
	}{
		{sdk.CodeNotFound, sdk.ErrNotFound},
		{sdk.CodePermissionDenied, sdk.ErrPermissionDenied},
		{sdk.CodeInvalidArgs, kernel.ErrInvalidArgs},
		{sdk.CodeInvalidArgs, sdk.ErrInvalidArgs},
		{"quota_exceeded", &sdk.Error{Code: "quota_exceeded"}},
	} {
		t.Run(tc.code, func(t *testing.T) {
			args, _ := json.Marshal(map[string]string{"code": tc.code, "message": "it went wrong"})
			_, err := call(t, tools["mb.fail"], string(args))
			var te *kernel.ToolError
			if !errors.As(err, &te) || te.Code != tc.code || te.Tool != "mb.fail" {
				t.Fatalf("err = %#v, want a ToolError with code %s", err, tc.code)
			}
			if !errors.Is(err, tc.target) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.target)
			}
			if !strings.Contains(err.Error(), "it went wrong") {
				t.Errorf("message lost: %q", err)
			}
		})
	}
	// The kernel validates against the schema before a call reaches the
	// plugin; a call that skips it (as here, straight to the host's tool)
	// still gets invalid_args from the plugin, which cannot decode it.
	t.Run("undecodable args are invalid_args from the plugin", func(t *testing.T) {
		_, err := call(t, tools["mb.echo"], `{"text":42}`)
		if !errors.Is(err, kernel.ErrInvalidArgs) || !errors.Is(err, sdk.ErrInvalidArgs) || !strings.Contains(err.Error(), "text") {
			t.Fatalf("err = %v, want invalid args naming text", err)
		}
	})
}

func TestCloseStopsEverything(t *testing.T) {
	h := subprocess.NewHost(subprocess.HostConfig{})
	tools := load(t, h, misbehaveConfig())
	p := pidOf(t, tools)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	waitNSDead(t, 3*time.Second, p.NS)
	if _, err := call(t, tools["mb.echo"], `{"text":"x"}`); !errors.Is(err, subprocess.ErrClosed) {
		t.Errorf("call after Close: %v, want ErrClosed", err)
	}
	if _, err := h.Load(testCtx(t), misbehaveConfig()); !errors.Is(err, subprocess.ErrClosed) {
		t.Errorf("Load after Close: %v, want ErrClosed", err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestCallsDuringCrashes hammers a plugin with calls while it crashes: every
// call either succeeds or reports the crash; none hangs or gets a wrong
// answer.
func TestCallsDuringCrashes(t *testing.T) {
	h := newHost(t, subprocess.HostConfig{})
	cfg := misbehaveConfig()
	cfg.Restart = subprocess.RestartPolicy{MaxCrashes: 100, Backoff: subprocess.Duration(time.Millisecond)}
	tools := load(t, h, cfg)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, failed := 0, 0
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprint("worker ", i)
			args, _ := json.Marshal(map[string]string{"text": want})
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := tools["mb.echo"].Call(testCtx(t), args)
				mu.Lock()
				switch {
				case err == nil && res.Content == want:
					ok++
				case errors.Is(err, subprocess.ErrCrashed):
					failed++
				default:
					t.Errorf("call: %q, %v", res.Content, err)
				}
				mu.Unlock()
			}
		}()
	}
	for range 3 {
		time.Sleep(50 * time.Millisecond)
		if _, err := call(t, tools["mb.crash"], `{"text":"hammer"}`); !errors.Is(err, subprocess.ErrCrashed) {
			t.Errorf("crash: %v", err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	if ok == 0 {
		t.Error("no call succeeded")
	}
	t.Logf("%d calls answered, %d failed with the crash", ok, failed)
}
