package langtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sandbox"
)

// TestSandboxedPlugins: a plugin in any language runs confined like a
// native process: it cannot read the kernel's home directory or connect
// to a socket, unless its grant says so. Each attack is also run with the
// grant that allows it, and must then succeed: the denial is the
// sandbox's doing, not the attack's failure.
func TestSandboxedPlugins(t *testing.T) {
	// The kernel's home: outside /tmp (the sandbox's private /tmp would
	// hide it for another reason).
	home, err := os.MkdirTemp(filepath.Join(artifact(t, "bin")), "test-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	t.Setenv("HOME", home)
	secret := filepath.Join(home, "secret.txt")
	if err := os.WriteFile(secret, []byte("kernel secret 4711"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)

	for _, lang := range languages {
		t.Run(lang, func(t *testing.T) {
			base := conformancePlugin(t, lang)
			base.Env = []string{"HOME"} // even the variable: the directory stays out of reach
			attack := func(t *testing.T, grant sandbox.Grant, tool, args string) (string, error) {
				t.Helper()
				cfg := base
				cfg.Sandbox = grant
				cfg.Start = subprocess.StartEager
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				tools, err := newHost(t).Load(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				for _, tl := range tools {
					if tl.Spec().Name == cfg.Name+"."+tool {
						res, err := tl.Call(ctx, []byte(args))
						return res.Content, err
					}
				}
				t.Fatalf("no tool %s", tool)
				return "", nil
			}
			read := fmt.Sprintf(`{"path":%q}`, secret)
			t.Run("read $HOME", func(t *testing.T) {
				out, err := attack(t, sandbox.Grant{}, "read", read)
				if err == nil || strings.Contains(out, "4711") || !strings.Contains(err.Error(), secret) {
					t.Fatalf("read %s: %q, %v; want it refused", secret, out, err)
				}
				if out, err := attack(t, sandbox.Grant{FS: []sandbox.FSRule{{Path: home, Mode: "ro"}}}, "read", read); err != nil || out != "kernel secret 4711" {
					t.Fatalf("granted: %q, %v", out, err)
				}
			})
			dial := fmt.Sprintf(`{"network":"tcp","address":"127.0.0.1:%d"}`, port)
			t.Run("connect to a socket", func(t *testing.T) {
				before := accepted.Load()
				out, err := attack(t, sandbox.Grant{}, "dial", dial)
				if err == nil || !kernelErr(err, "permission_denied") {
					t.Fatalf("dial: %q, %v; want it refused", out, err)
				}
				if n := accepted.Load(); n != before {
					t.Fatalf("the listener accepted %d connections from a plugin without network", n-before)
				}
				if out, err := attack(t, sandbox.Grant{Net: &sandbox.Net{Connect: []uint16{port}}}, "dial", dial); err != nil || !strings.HasPrefix(out, "connected") {
					t.Fatalf("granted: %q, %v", out, err)
				}
				// The listener accepts in its own goroutine.
				for deadline := time.Now().Add(20 * time.Second); accepted.Load() != before+1; time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the granted connection did not arrive")
					}
				}
			})
			t.Run("write its own files", func(t *testing.T) { writeOwnFiles(t, base) })
		})
	}
}

// writeOwnFiles: a plugin cannot change what it runs from. Its private
// copy (the binary, or the interpreted plugin's copied directory) is
// read-only under the sandbox, whatever the file modes say (the tests run
// as root). (Its source directory is not in its view at all: see read
// $HOME for a directory outside the grant.) The control: the
// same tool writes a directory its grant lets it write.
func writeOwnFiles(t *testing.T, cfg subprocess.PluginConfig) {
	// A short run directory: unix socket paths are at most 107 bytes.
	runDir, err := os.MkdirTemp("", "ak-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runDir) })
	out := t.TempDir()
	h := subprocess.NewHost(subprocess.HostConfig{RunDir: runDir, Logger: hclog.New(&hclog.LoggerOptions{Output: logWriter{t}, Level: hclog.Warn})})
	t.Cleanup(func() { _ = h.Close() })
	cfg.Start = subprocess.StartEager
	cfg.Sandbox = sandbox.Grant{FS: []sandbox.FSRule{{Path: out, Mode: "rw"}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tools, err := h.Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mark kernel.Tool
	for _, tl := range tools {
		if tl.Spec().Name == cfg.Name+".mark" {
			mark = tl
		}
	}
	if mark == nil {
		t.Fatal("no tool mark")
	}
	copies, err := filepath.Glob(filepath.Join(runDir, "agentkernel-plugins-*", cfg.Name+"-*"))
	if err != nil || len(copies) != 1 {
		t.Fatalf("the private copy of %s: %v, %v", cfg.Name, copies, err)
	}
	targets := []string{copies[0]} // a Go plugin's copy is its binary
	if cfg.Interpreter != nil {
		targets = []string{
			filepath.Join(copies[0], filepath.Base(cfg.Path)), // the script it runs
			filepath.Join(copies[0], "added"),                 // a new file beside it
		}
	}
	for _, target := range targets {
		before, _ := os.ReadFile(target)
		res, err := mark.Call(ctx, []byte(fmt.Sprintf(`{"path":%q}`, target)))
		after, _ := os.ReadFile(target)
		if err == nil || string(after) == "marked" || string(after) != string(before) {
			t.Errorf("mark %s: %q, %v; the file went from %d to %d bytes; want the write refused", target, res.Content, err, len(before), len(after))
		}
	}
	granted := filepath.Join(out, "m")
	if res, err := mark.Call(ctx, []byte(fmt.Sprintf(`{"path":%q}`, granted))); err != nil || res.Content != "marked" {
		t.Fatalf("granted: %q, %v", res.Content, err)
	}
	if b, err := os.ReadFile(granted); err != nil || string(b) != "marked" {
		t.Fatalf("granted: %s holds %q, %v", granted, b, err)
	}
}

func kernelErr(err error, code string) bool {
	te, ok := err.(*kernel.ToolError)
	return ok && te.Code == code
}
