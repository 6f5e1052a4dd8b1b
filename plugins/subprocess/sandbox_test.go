//go:build linux

package subprocess_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/sandbox/sandboxtest"
)

// The attacks of issue 11, through a subprocess plugin. Each fails if the
// sandbox layer that stops it is removed.

// TestPluginCannotReadHomeOrStore: by default a plugin reads nothing but
// its own binary and the system libraries: not $HOME, not the store, not
// the kernel's files.
func TestPluginCannotReadHomeOrStore(t *testing.T) {
	d := secretDirs(t, 3)
	home, store, granted := d[0], d[1], d[2]
	t.Setenv("HOME", home)
	h := newHost(t, subprocess.HostConfig{})
	cfg := misbehaveConfig()
	cfg.Env = []string{"HOME"}
	cfg.Sandbox = sandbox.Grant{FS: []sandbox.FSRule{{Path: granted, Mode: "ro"}}}
	tools := load(t, h, cfg)
	for _, f := range []string{filepath.Join(home, "f"), filepath.Join(store, "f"), misbehave.path} {
		res, err := call(t, tools["mb.read"], fmt.Sprintf(`{"text":%q}`, f))
		if err == nil && strings.Contains(res.Content, "secret") {
			t.Fatalf("the plugin read %s: %q", f, res.Content)
		}
		if !refused(err) {
			t.Fatalf("read %s: want it refused (not in the sandbox's view, or denied by Landlock), got %v %q", f, err, res.Content)
		}
	}
	if got := mustCall(t, tools["mb.read"], fmt.Sprintf(`{"text":%q}`, filepath.Join(granted, "f"))); !strings.HasPrefix(got, "secret-") {
		t.Fatalf("the granted directory is not readable: %q", got)
	}
}

// TestPluginSandboxAttacks runs the shell attacks from inside a plugin
// granted the system directories and one workspace.
func TestPluginSandboxAttacks(t *testing.T) {
	const key = "sk-plugin-kernel-secret-33c1"
	t.Setenv("AGENTKERNEL_TEST_PLUGIN_KEY", key)
	ws, outside := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	port := int(sandboxtest.Listener(t))

	h := newHost(t, subprocess.HostConfig{})
	cfg := misbehaveConfig()
	cfg.Sandbox = sandbox.Grant{FS: append(sandbox.SystemDirs(),
		sandbox.FSRule{Path: ws, Mode: "rw"}, sandbox.FSRule{Path: filepath.Join(ws, ".git"), Mode: "ro"})}
	tools := load(t, h, cfg)
	sh := func(script string) string { return mustCall(t, tools["mb.sh"], fmt.Sprintf(`{"text":%q}`, script)) }

	// Every environment the plugin can reach, searched for the kernel's key
	// (the script prints only what it finds and how many it read).
	out := sh(`n=0; for p in /proc/1 /proc/$PPID /proc/[0-9]*; do n=$((n+1)); cat $p/environ 2>/dev/null | tr '\0' '\n' | grep '^AGENTKERNEL_TEST_PLUGIN_KEY='; done; echo read $n`)
	if !strings.Contains(out, "read ") {
		t.Fatalf("the environment scan did not run:\n%s", out)
	}
	if strings.Contains(out, key) {
		t.Fatalf("the kernel's environment is readable from the plugin:\n%s", out)
	}
	out = sh("echo x > " + outside + "/m; echo x > " + ws + "/.git/config; echo ok > " + ws + "/m")
	if _, err := os.Stat(filepath.Join(outside, "m")); err == nil {
		t.Fatalf("the plugin wrote outside its grant:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git", "config")); err == nil {
		t.Fatalf("the plugin wrote into .git:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "m")); string(b) != "ok\n" {
		t.Fatalf("the granted workspace is not writable:\n%s", out)
	}
	if py := "/usr/bin/python3"; fileExists(py) {
		out = sh(fmt.Sprintf(`%s -c "import socket; s=socket.create_connection(('127.0.0.1', %d), timeout=5); print(s.recv(9).decode())"`, py, port))
		if strings.Contains(out, "reached") {
			t.Fatalf("the plugin reached the network without a grant:\n%s", out)
		}
	}
	out = sh("exec >/dev/null 2>&1; setsid sleep 700.5 & (sleep 700.5 &); nohup sleep 700.5 & echo started")
	if !strings.Contains(out, "[<nil>]") {
		t.Fatal(out)
	}
	ns := pidOf(t, tools).NS
	if len(nsProcs(ns)) < 4 {
		t.Fatalf("the plugin's sleepers are not running: %v", nsProcs(ns))
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	waitNSDead(t, 5*time.Second, ns)
}

// TestPluginLimits: a plugin stopped by a limit crashes with an error that
// names the limit.
func TestPluginLimits(t *testing.T) {
	cases := []struct {
		tool, limit string
		grant       sandbox.Grant
	}{
		// Go reserves about 600 MiB of address space at start: 1 GiB is the
		// smallest useful limit for a Go plugin.
		{"mb.hog", "memory_mb", sandbox.Grant{MemoryMB: 1024}},
		{"mb.spin", "cpu", sandbox.Grant{CPU: sandbox.Duration(time.Second)}},
	}
	for _, c := range cases {
		t.Run(c.limit, func(t *testing.T) {
			h := newHost(t, subprocess.HostConfig{})
			cfg := misbehaveConfig()
			cfg.Sandbox = c.grant
			tools := load(t, h, cfg)
			_, err := call(t, tools[c.tool], `{}`)
			if !errors.Is(err, subprocess.ErrCrashed) {
				t.Fatalf("want a crash, got %v", err)
			}
			if !strings.Contains(err.Error(), "sandbox limit "+c.limit+" reached") {
				t.Fatalf("the crash does not name the limit %s: %v", c.limit, err)
			}
		})
	}
}

// TestWrapperScriptRefused: a pinned script would run what nobody pinned.
func TestWrapperScriptRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "wrapper.sh")
	body := "#!/bin/sh\nexec " + misbehave.path + " \"$@\"\n"
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256Hex(body)
	h := newHost(t, subprocess.HostConfig{})
	_, err := h.Load(testCtx(t), subprocess.PluginConfig{Name: "wrap", Path: p, SHA256: sum, Start: subprocess.StartEager})
	if !errors.Is(err, subprocess.ErrWrapper) {
		t.Fatalf("want ErrWrapper, got %v", err)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
