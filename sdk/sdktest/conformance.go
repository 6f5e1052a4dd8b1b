package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sdk"
)

// Probe is a call of one of the plugin's own tools (its name without the
// "plugin." prefix) with JSON arguments.
type Probe struct {
	Tool string
	Args string
}

func (p Probe) set() bool { return p.Tool != "" }

// Conformance is the kernel's conformance suite for tool plugins, in any
// language: a Go binary, or an interpreter and a script (sdk/typescript,
// sdk/python). It runs the plugin through the kernel's real host (pin,
// sandbox, go-plugin handshake with AutoMTLS, health check) and checks
// what every plugin must do the same way, using calls of the plugin's own
// tools (the probes) to exercise each behaviour. Run it with Run.
//
// The checks, one subtest each: handshake (verify and start, an SDK
// version, a graceful stop), schemas (each compiles as the kernel compiles
// it, an object schema), tiers, errors (a tool's own code crosses the
// boundary; arguments that are not an object are the plugin's
// invalid_args), progress, cancellation (the call ends as cancelled, the
// plugin keeps running, and Stopped sees its work stop), deadline (the
// call ends as timed out and the plugin answers again after), output_cut
// (the plugin itself cuts a result longer than the cap plus 1 MiB, which
// the host would otherwise refuse), crash_restart (the plugin's process
// killed mid-call is a crash with its text, and the next call starts it
// again), side_effect (the side-effect check answers not_run before the
// call and completed after it), and shutdown (the plugin exits when the
// host asks, within go-plugin's grace period). Crash and Ignore add a
// crash of the plugin's own making and a call that ignores its deadline.
type Conformance struct {
	// Plugin configures the plugin as kernel.yaml would; its pin must be
	// right. The suite loads it under Plugin.Name, and again under derived
	// names with its own Timeout (Deadline) and MaxOutputBytes (4096).
	Plugin subprocess.PluginConfig
	// Echo succeeds, and its result contains EchoWant.
	Echo     Probe
	EchoWant string
	// Fail fails with the tool's own error code FailCode.
	Fail     Probe
	FailCode string
	// Progress reports progress at least once, then succeeds.
	Progress Probe
	// Block reports progress once it runs, then does not answer until its
	// call is cancelled or reaches its deadline, and then stops.
	Block Probe
	// Stopped, if set, is called after Block was cancelled: it fails the
	// test unless the plugin's work for that call stopped.
	Stopped func(t *testing.T)
	// Large returns more than 4096 + 1 MiB bytes.
	Large Probe
	// Effect is a call of a side-effecting tool whose plugin checks side
	// effects, with arguments whose effect is not in place yet.
	Effect Probe
	// Crash, if set, makes the plugin process die during the call; the
	// crash text the model reads then contains CrashText.
	Crash     Probe
	CrashText string
	// Ignore, if set, never answers and ignores the end of its call: the
	// host must kill the plugin at the deadline.
	Ignore Probe
	// Deadline is the deadline of the deadline checks (default 3s).
	Deadline time.Duration
	// Hooks says the plugin serves the conformance hooks (see runHooks):
	// the hooks check runs its hook service through the host and in a run.
	Hooks bool
	// HookMarks is a directory the plugin may write (required with Hooks):
	// the hang hook writes there that its call ended.
	HookMarks string
}

// conformanceCap is the output cap of the output_cut check.
const conformanceCap = 4096

// Run runs the suite. The host logs to the test log (warnings and above).
func (c Conformance) Run(t *testing.T) {
	t.Helper()
	for _, p := range []struct {
		name  string
		probe Probe
	}{{"Echo", c.Echo}, {"Fail", c.Fail}, {"Progress", c.Progress}, {"Block", c.Block}, {"Large", c.Large}, {"Effect", c.Effect}} {
		if !p.probe.set() {
			t.Fatalf("sdktest.Conformance: probe %s is not set", p.name)
		}
	}
	if c.Deadline <= 0 {
		c.Deadline = 3 * time.Second
	}
	var logs testutil.SyncBuffer
	host := subprocess.NewHost(subprocess.HostConfig{
		Logger: hclog.New(&hclog.LoggerOptions{Name: "conformance", Output: io.MultiWriter(&logs, tbWriter{t}), Level: hclog.Warn}),
	})
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = host.Close()
		}
	})
	ctx := context.Background()
	cfg := c.Plugin
	cfg.Start = subprocess.StartEager

	var tools map[string]kernel.Tool
	t.Run("handshake", func(t *testing.T) {
		rep, err := host.Verify(ctx, cfg)
		if err != nil {
			t.Fatalf("verify: %v", err)
		}
		if rep.SDKVersion == "" || len(rep.Tools) == 0 {
			t.Fatalf("verify: SDK version %q, %d tools", rep.SDKVersion, len(rep.Tools))
		}
		t.Logf("%s: SDK %s, %d tools, verified and started in %s", cfg.Name, rep.SDKVersion, len(rep.Tools), rep.StartTime.Round(time.Millisecond))
	})
	tools = c.load(t, host, cfg)

	t.Run("schemas", func(t *testing.T) {
		reg := kernel.NewRegistry()
		for name, tl := range tools {
			s := tl.Spec()
			var top map[string]any
			if err := json.Unmarshal(s.Schema, &top); err != nil || top["type"] != "object" {
				t.Errorf("tool %s: schema %s is not an object schema", name, s.Schema)
			}
			if s.Source != "subprocess:"+cfg.Name {
				t.Errorf("tool %s: source %q", name, s.Source)
			}
			if err := reg.Register(tl); err != nil {
				t.Errorf("the kernel refuses tool %s: %v", name, err)
			}
		}
	})

	t.Run("tiers", func(t *testing.T) {
		for name, tl := range tools {
			if !tl.Spec().Tier.Valid() {
				t.Errorf("tool %s: tier %q", name, tl.Spec().Tier)
			}
		}
		if tier := tool(t, tools, c.Effect).Spec().Tier; tier == kernel.TierReadOnly {
			t.Errorf("side-effecting probe %s is read_only", c.Effect.Tool)
		}
	})

	t.Run("errors", func(t *testing.T) {
		res, err := call(ctx, tool(t, tools, c.Fail), c.Fail.Args)
		var te *kernel.ToolError
		if !errors.As(err, &te) || te.Code != c.FailCode || !errors.Is(err, &sdk.Error{Code: c.FailCode}) || !res.IsError {
			t.Errorf("%s: %+v, %v; want a tool error with code %s", c.Fail.Tool, res, err, c.FailCode)
		}
		// The kernel checks arguments against the schema first; the
		// plugin still refuses arguments that are not an object.
		_, err = tool(t, tools, c.Echo).Call(ctx, json.RawMessage(`[1,2]`))
		if !errors.Is(err, kernel.ErrInvalidArgs) {
			t.Errorf("%s with an array: %v, want invalid_args", c.Echo.Tool, err)
		}
		res, err = call(ctx, tool(t, tools, c.Echo), c.Echo.Args)
		if err != nil || !strings.Contains(res.Content, c.EchoWant) {
			t.Errorf("%s: %q, %v; want a result containing %q", c.Echo.Tool, res.Content, err, c.EchoWant)
		}
	})

	if c.Hooks {
		t.Run("hooks", func(t *testing.T) { c.runHooks(t, host, cfg) })
	}

	t.Run("progress", func(t *testing.T) {
		var mu sync.Mutex
		var got []string
		pctx := kernel.WithProgress(ctx, func(s string) {
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
		})
		if _, err := call(pctx, tool(t, tools, c.Progress), c.Progress.Args); err != nil {
			t.Fatalf("%s: %v", c.Progress.Tool, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 {
			t.Fatalf("%s reported no progress", c.Progress.Tool)
		}
	})

	t.Run("cancellation", func(t *testing.T) {
		before := pid(t, host, cfg.Name)
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var once sync.Once
		cctx = kernel.WithProgress(cctx, func(string) { once.Do(cancel) })
		_, err := call(cctx, tool(t, tools, c.Block), c.Block.Args)
		if !errors.Is(err, kernel.ErrCancelled) {
			t.Fatalf("%s cancelled: %v, want cancelled", c.Block.Tool, err)
		}
		if c.Stopped != nil {
			c.Stopped(t)
		}
		if _, err := call(ctx, tool(t, tools, c.Echo), c.Echo.Args); err != nil {
			t.Fatalf("%s after a cancelled call: %v", c.Echo.Tool, err)
		}
		if after := pid(t, host, cfg.Name); after != before {
			t.Errorf("a cancelled call restarted the plugin (pid %d, then %d): cancelling must not kill it", before, after)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		dcfg := cfg
		dcfg.Name, dcfg.Timeout = derived(cfg.Name, "dl"), subprocess.Duration(c.Deadline)
		dtools := c.load(t, host, dcfg)
		probes := []Probe{c.Block}
		if c.Ignore.set() {
			probes = append(probes, c.Ignore)
		}
		for _, p := range probes {
			_, err := call(ctx, tool(t, dtools, p), p.Args)
			if !errors.Is(err, kernel.ErrToolTimeout) || !strings.Contains(err.Error(), "deadline") {
				t.Errorf("%s past its deadline: %v, want a timeout", p.Tool, err)
			}
			if _, err := call(ctx, tool(t, dtools, c.Echo), c.Echo.Args); err != nil {
				t.Errorf("%s after %s timed out: %v", c.Echo.Tool, p.Tool, err)
			}
		}
	})

	t.Run("output_cut", func(t *testing.T) {
		ocfg := cfg
		ocfg.Name, ocfg.MaxOutputBytes = derived(cfg.Name, "out"), conformanceCap
		res, err := call(ctx, tool(t, c.load(t, host, ocfg), c.Large), c.Large.Args)
		if err != nil {
			t.Fatalf("%s: %v (a plugin that does not cut its output to max_output_bytes is refused)", c.Large.Tool, err)
		}
		m := regexp.MustCompile(`\n\[output truncated: (\d+) bytes, limit 4096\]$`).FindStringSubmatchIndex(res.Content)
		if m == nil {
			t.Fatalf("%s: result of %d bytes does not end with the truncation marker", c.Large.Tool, len(res.Content))
		}
		total, _ := strconv.Atoi(res.Content[m[2]:m[3]])
		if total <= conformanceCap+1<<20 || m[0] > conformanceCap {
			t.Fatalf("%s: %d bytes kept of %d; the probe must return more than 4096 + 1 MiB and the plugin keep at most 4096", c.Large.Tool, m[0], total)
		}
	})

	t.Run("crash_restart", func(t *testing.T) {
		victim := pid(t, host, cfg.Name)
		kctx := kernel.WithProgress(ctx, func(string) {
			// The call runs: the process dies under it, as if the
			// OOM killer took it.
			_ = syscall.Kill(victim, syscall.SIGKILL)
		})
		_, err := call(kctx, tool(t, tools, c.Block), c.Block.Args)
		if !errors.Is(err, subprocess.ErrCrashed) {
			t.Fatalf("%s while the plugin was killed: %v, want a crash", c.Block.Tool, err)
		}
		if c.Crash.set() {
			_, err := call(ctx, tool(t, tools, c.Crash), c.Crash.Args)
			if !errors.Is(err, subprocess.ErrCrashed) || !strings.Contains(err.Error(), c.CrashText) {
				t.Fatalf("%s: %v, want a crash whose text contains %q", c.Crash.Tool, err, c.CrashText)
			}
		}
		if _, err := call(ctx, tool(t, tools, c.Echo), c.Echo.Args); err != nil {
			t.Fatalf("%s after the crash: %v (the plugin must start again)", c.Echo.Tool, err)
		}
		if now := pid(t, host, cfg.Name); now == victim {
			t.Fatalf("the crashed process %d still serves", victim)
		}
	})

	t.Run("side_effect", func(t *testing.T) {
		tl := tool(t, tools, c.Effect)
		checker, ok := tl.(kernel.SideEffectChecker)
		if !ok {
			t.Fatalf("tool %s cannot check side effects", c.Effect.Tool)
		}
		since := time.Now().Add(-time.Second)
		if e, detail := checker.CheckSideEffect(ctx, json.RawMessage(c.Effect.Args), since); e != kernel.SideEffectNotRun {
			t.Fatalf("%s before the call: %v (%q), want not run", c.Effect.Tool, e, detail)
		}
		if _, err := call(ctx, tl, c.Effect.Args); err != nil {
			t.Fatalf("%s: %v", c.Effect.Tool, err)
		}
		e, detail := checker.CheckSideEffect(ctx, json.RawMessage(c.Effect.Args), since)
		if e != kernel.SideEffectCompleted || detail == "" {
			t.Fatalf("%s after the call: %v (%q), want completed with a detail", c.Effect.Tool, e, detail)
		}
	})

	t.Run("shutdown", func(t *testing.T) {
		closed = true
		if err := host.Close(); err != nil {
			t.Fatal(err)
		}
		// go-plugin's Kill asks the plugin to exit (GRPCController.Shutdown)
		// and kills it if it has not within two seconds.
		if strings.Contains(logs.String(), "plugin failed to exit gracefully") {
			t.Fatalf("the plugin did not exit when the host asked it to (GRPCController.Shutdown):\n%s", logs.String())
		}
	})
}

// load loads cfg into host and returns its tools by their own names.
func (c Conformance) load(t *testing.T, host *subprocess.Host, cfg subprocess.PluginConfig) map[string]kernel.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ts, err := host.Load(ctx, cfg)
	if err != nil {
		t.Fatalf("load %s: %v", cfg.Name, err)
	}
	out := map[string]kernel.Tool{}
	for _, tl := range ts {
		out[strings.TrimPrefix(tl.Spec().Name, cfg.Name+".")] = tl
	}
	return out
}

func tool(t *testing.T, tools map[string]kernel.Tool, p Probe) kernel.Tool {
	t.Helper()
	tl, ok := tools[p.Tool]
	if !ok {
		t.Fatalf("the plugin has no tool %q", p.Tool)
	}
	return tl
}

// call calls tl with args under a minute's bound (the suite's own
// deadlines are shorter).
func call(ctx context.Context, tl kernel.Tool, args string) (kernel.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return tl.Call(ctx, json.RawMessage(args))
}

// pid is the running plugin process's id (the sandbox's launcher).
func pid(t *testing.T, host *subprocess.Host, name string) int {
	t.Helper()
	for _, st := range host.Status() {
		if st.Name == name && st.PID != 0 {
			return st.PID
		}
	}
	t.Fatalf("plugin %s is not running", name)
	return 0
}

// derived names a second instance of plugin name, within the 32
// characters a plugin name may have.
func derived(name, suffix string) string {
	if len(name)+1+len(suffix) > 32 {
		name = name[:32-1-len(suffix)]
	}
	return fmt.Sprintf("%s-%s", name, suffix)
}
