package subprocess_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/sdk/sdktest"
)

// misbehave is the test plugin binary, built once by TestMain.
var misbehave struct {
	path, sum string
}

func TestMain(m *testing.M) {
	sandbox.Main()
	if os.Getenv(helperHostEnv) != "" {
		os.Exit(helperHost())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "subprocess-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	misbehave.path = filepath.Join(dir, "misbehave")
	if err := sdktest.BuildTo(misbehave.path, "./testdata/misbehave"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if misbehave.sum, err = sdktest.FileSHA256(misbehave.path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// logBuffer is the shared concurrency-safe log sink.
type logBuffer = testutil.SyncBuffer

// newHost returns a host that is closed when the test ends.
func newHost(t testing.TB, cfg subprocess.HostConfig) *subprocess.Host {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	h := subprocess.NewHost(cfg)
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("close host: %v", err)
		}
	})
	return h
}

// misbehaveConfig pins the test plugin.
func misbehaveConfig(args ...string) subprocess.PluginConfig {
	return subprocess.PluginConfig{Name: "mb", Path: misbehave.path, SHA256: misbehave.sum, Args: args}
}

// load loads cfg and returns its tools by their full name.
func load(t testing.TB, h *subprocess.Host, cfg subprocess.PluginConfig) map[string]kernel.Tool {
	t.Helper()
	tools, err := h.Load(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	m := map[string]kernel.Tool{}
	for _, tool := range tools {
		m[tool.Spec().Name] = tool
	}
	return m
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func call(t testing.TB, tool kernel.Tool, args string) (kernel.Result, error) {
	t.Helper()
	if tool == nil {
		t.Fatal("no such tool")
	}
	return tool.Call(testCtx(t), []byte(args))
}

func mustCall(t testing.TB, tool kernel.Tool, args string) string {
	t.Helper()
	res, err := call(t, tool, args)
	if err != nil {
		t.Fatalf("call %s: %v", tool.Spec().Name, err)
	}
	return res.Content
}

// alive reports whether pid is a live process (a zombie counts as dead).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...
	s := string(b)
	i := strings.LastIndex(s, ")")
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// The plugin runs in its own PID namespace: the pids it reports are in
// that namespace, and the host's /proc finds them by namespace.

// nsProcs lists the live host pids in PID namespace ns, with their pid in
// that namespace.
func nsProcs(ns string) map[int]int {
	out := map[int]int{} // ns pid -> host pid
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err != nil || l != ns {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
				f := strings.Fields(rest)
				if n, err := strconv.Atoi(f[len(f)-1]); err == nil {
					out[n] = pid
				}
			}
		}
	}
	return out
}

// nsAlive reports whether the process nspid of namespace ns is running.
func nsAlive(ns string, nspid int) bool {
	_, ok := nsProcs(ns)[nspid]
	return ok
}

// waitNSDead waits up to d for every process of PID namespace ns to be gone.
func waitNSDead(t testing.TB, d time.Duration, ns string) {
	t.Helper()
	if ns == "" {
		t.Fatal("the plugin reported no PID namespace")
	}
	deadline := time.Now().Add(d)
	for {
		left := nsProcs(ns)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the plugin's PID namespace still alive after %s: %v", d, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hclogTo returns a debug-level logger writing to w.
func hclogTo(w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: w, Level: hclog.Debug})
}

// waitFor polls cond until it holds or d has passed.
func waitFor(t testing.TB, d time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
