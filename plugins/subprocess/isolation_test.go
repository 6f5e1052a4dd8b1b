package subprocess_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sdk"
)

func TestEnvironmentIsNotInherited(t *testing.T) {
	t.Setenv("AGENTKERNEL_TEST_SECRET", "hunter2-host-secret")
	t.Setenv("AK_TEST_ALLOWED", "visible")
	h := newHost(t, subprocess.HostConfig{})
	cfg := misbehaveConfig()
	cfg.Env = []string{"AK_TEST_ALLOWED", "AK_TEST_UNSET"}
	tools := load(t, h, cfg)
	var env []string
	if err := json.Unmarshal([]byte(mustCall(t, tools["mb.env"], `{}`)), &env); err != nil {
		t.Fatal(err)
	}
	handshake := map[string]bool{
		"AGENTKERNEL_PLUGIN": true, "PLUGIN_MIN_PORT": true, "PLUGIN_MAX_PORT": true,
		"PLUGIN_PROTOCOL_VERSIONS": true, "PLUGIN_CLIENT_CERT": true, "PLUGIN_UNIX_SOCKET_DIR": true,
	}
	sawAllowed := false
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case strings.Contains(kv, "hunter2"):
			t.Errorf("the host's secret reached the plugin: %q", kv)
		case name == "AK_TEST_ALLOWED":
			sawAllowed = value == "visible"
		case !handshake[name]:
			t.Errorf("variable %s was inherited without being allowed", name)
		}
	}
	if !sawAllowed {
		t.Errorf("the allowed variable is missing: %v", env)
	}
	// The socket directory is private.
	for _, kv := range env {
		if dir, ok := strings.CutPrefix(kv, "PLUGIN_UNIX_SOCKET_DIR="); ok {
			fi, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o700 {
				t.Errorf("socket directory %s has mode %s, want 0700", dir, fi.Mode().Perm())
			}
		}
	}
}

func TestOwnProcessGroup(t *testing.T) {
	h := newHost(t, subprocess.HostConfig{})
	p := pidOf(t, load(t, h, misbehaveConfig()))
	// The plugin runs under the sandbox's init (pid 1 of its own PID
	// namespace), in the launcher's process group, which the host leads
	// from outside: a kill of the group takes everything.
	if p.PPID != 1 {
		t.Errorf("plugin ppid = %d, want the sandbox's init, 1", p.PPID)
	}
	if p.PGID != 1 {
		t.Errorf("plugin pgid = %d, want the launcher's group (1 in the namespace)", p.PGID)
	}
	self, _ := os.Readlink("/proc/self/ns/pid")
	if p.NS == "" || p.NS == self {
		t.Errorf("plugin PID namespace %q: want its own", p.NS)
	}
}

func TestOutputFloodTruncated(t *testing.T) {
	h := newHost(t, subprocess.HostConfig{})
	const limit = 64 << 10
	cfg := misbehaveConfig()
	cfg.MaxOutputBytes = limit
	tools := load(t, h, cfg)

	raw := misbehaveConfig("-raw")
	raw.Name = "raw"
	raw.MaxOutputBytes = limit
	rawTools := load(t, h, raw)

	for _, tc := range []struct {
		name  string
		tool  kernel.Tool
		bytes int
	}{
		{"sdk truncates", tools["mb.flood"], 10 << 20},
		{"host truncates a plugin that ignores the cap", rawTools["raw.flood"], 512 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := call(t, tc.tool, fmt.Sprintf(`{"bytes":%d}`, tc.bytes))
			if err != nil {
				t.Fatal(err)
			}
			marker := sdk.TruncationMarker(tc.bytes, limit)
			if !strings.HasSuffix(res.Content, marker) {
				t.Fatalf("content (%d bytes) does not end with %q", len(res.Content), marker)
			}
			if len(res.Content) != limit+len(marker) {
				t.Errorf("content is %d bytes, want %d", len(res.Content), limit+len(marker))
			}
		})
	}
	t.Run("a message over the transport limit is refused", func(t *testing.T) {
		_, err := call(t, rawTools["raw.flood"], fmt.Sprintf(`{"bytes":%d}`, 4<<20))
		var te *kernel.ToolError
		if !errors.As(err, &te) || te.Code != "output_too_large" {
			t.Fatalf("err = %v, want output_too_large", err)
		}
		if got := mustCall(t, rawTools["raw.flood"], `{"bytes":3}`); got != "yyy" {
			t.Errorf("next call = %q", got)
		}
	})
	t.Run("invalid error codes are not passed on", func(t *testing.T) {
		_, err := call(t, rawTools["raw.badcode"], `{}`)
		var te *kernel.ToolError
		if !errors.As(err, &te) || te.Code != sdk.CodeToolError {
			t.Fatalf("err = %#v, want code tool_error", err)
		}
	})
}

// The helper host: TestHostKilledPluginExits runs the test binary again
// with helperHostEnv set; TestMain then calls helperHost instead of the
// tests. It loads the plugin, starts a grandchild with sdk.Command, prints
// "<plugin pid> <grandchild pid>" and waits to be killed.
const helperHostEnv = "AGENTKERNEL_TEST_HELPER_HOST"

func helperHost() int {
	h := subprocess.NewHost(subprocess.HostConfig{RunDir: os.Getenv("AK_HELPER_RUNDIR")})
	ctx := context.Background()
	tools, err := h.Load(ctx, subprocess.PluginConfig{Name: "mb", Path: os.Getenv("AK_HELPER_PLUGIN"), SHA256: os.Getenv("AK_HELPER_SHA256")})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	byName := map[string]kernel.Tool{}
	for _, t := range tools {
		byName[t.Spec().Name] = t
	}
	res, err := byName["mb.pid"].Call(ctx, []byte(`{}`))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	var p procInfo
	_ = json.Unmarshal([]byte(res.Content), &p)
	res, err = byName["mb.spawn"].Call(ctx, []byte(`{"count":1,"sdk":true}`))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	var kids []int
	_ = json.Unmarshal([]byte(res.Content), &kids)
	fmt.Println(p.NS, kids[0])
	time.Sleep(time.Minute) // killed long before
	return 0
}

func TestHostKilledPluginExits(t *testing.T) {
	// The helper cannot clean up after itself: give it a directory of ours
	// (short, for the socket paths).
	runDir, err := os.MkdirTemp("", "akh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runDir) })
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperHostEnv+"=1",
		"AK_HELPER_PLUGIN="+misbehave.path, "AK_HELPER_SHA256="+misbehave.sum, "AK_HELPER_RUNDIR="+runDir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper host: %v", err)
	}
	var ns string
	var grandchild int
	if _, err := fmt.Sscanf(line, "%s %d", &ns, &grandchild); err != nil {
		t.Fatalf("helper host said %q", line)
	}
	if len(nsProcs(ns)) < 2 || !nsAlive(ns, grandchild) {
		t.Fatal("plugin or grandchild not running")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitNSDead(t, 5*time.Second, ns)
}

func TestConfigValidation(t *testing.T) {
	ok := misbehaveConfig()
	for _, tc := range []struct {
		name  string
		edit  func(*subprocess.PluginConfig)
		field string
	}{
		{"bad name", func(c *subprocess.PluginConfig) { c.Name = "Git Tools" }, "name"},
		{"dotted name", func(c *subprocess.PluginConfig) { c.Name = "a.b" }, "name"},
		{"no path", func(c *subprocess.PluginConfig) { c.Path = " " }, "path"},
		{"short hash", func(c *subprocess.PluginConfig) { c.SHA256 = "abc" }, "sha256"},
		{"skip is not a hash", func(c *subprocess.PluginConfig) { c.SHA256 = "skip" }, "sha256"},
		{"env with value", func(c *subprocess.PluginConfig) { c.Env = []string{"HOME=/x"} }, "env[0]"},
		{"reserved env", func(c *subprocess.PluginConfig) { c.Env = []string{"PATH", "PLUGIN_CLIENT_CERT"} }, "env[1]"},
		{"duplicate env", func(c *subprocess.PluginConfig) { c.Env = []string{"PATH", "PATH"} }, "env[1]"},
		{"negative timeout", func(c *subprocess.PluginConfig) { c.Timeout = -1 }, "timeout"},
		{"huge output", func(c *subprocess.PluginConfig) { c.MaxOutputBytes = 1 << 30 }, "max_output_bytes"},
		{"negative crashes", func(c *subprocess.PluginConfig) { c.Restart.MaxCrashes = -1 }, "restart.max_crashes"},
		{"negative backoff", func(c *subprocess.PluginConfig) { c.Restart.Backoff = -1 }, "restart.backoff"},
		{"negative cooldown", func(c *subprocess.PluginConfig) { c.Restart.Cooldown = -1 }, "restart.cooldown"},
		{"bad start", func(c *subprocess.PluginConfig) { c.Start = "sometimes" }, "start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			var ce *subprocess.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("err = %v, want a ConfigError for field %s", err, tc.field)
			}
			if _, lerr := newHost(t, subprocess.HostConfig{}).Load(testCtx(t), c); !errors.As(lerr, &ce) {
				t.Errorf("Load accepted it: %v", lerr)
			}
		})
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

func TestDuplicatePluginName(t *testing.T) {
	h := newHost(t, subprocess.HostConfig{})
	load(t, h, misbehaveConfig())
	_, err := h.Load(testCtx(t), misbehaveConfig())
	var ce *subprocess.ConfigError
	if !errors.As(err, &ce) || ce.Field != "name" {
		t.Fatalf("err = %v, want a ConfigError on name", err)
	}
}
