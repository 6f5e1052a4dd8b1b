package langtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sdk/sdktest"
)

// newHost returns a host closed when the test ends, logging warnings to
// the test log.
func newHost(t testing.TB) *subprocess.Host {
	t.Helper()
	h := subprocess.NewHost(subprocess.HostConfig{Logger: hclog.New(&hclog.LoggerOptions{Output: logWriter{t}, Level: hclog.Warn})})
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func load(t testing.TB, cfg subprocess.PluginConfig) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg.Start = subprocess.StartEager
	_, err := newHost(t).Load(ctx, cfg)
	return err
}

// TestBadInterpretedPlugins: an interpreted plugin that misbehaves at start
// gets the error a Go plugin gets, naming the plugin and the fix, in its
// SDK's words.
func TestBadInterpretedPlugins(t *testing.T) {
	t.Parallel()
	sdkPy := "from agentkernel_plugin import serve, tool\n"
	cases := []struct {
		name string
		cfg  func(t *testing.T) subprocess.PluginConfig
		want []string
	}{
		{"python prints before the handshake", func(t *testing.T) subprocess.PluginConfig {
			return pythonPlugin(t, "noisy", "print('hello from the plugin')\n"+sdkPy+
				"serve([tool(name='t', tier='read_only')(lambda a, c: '')])\n")
		}, []string{`start plugin "noisy"`, `it printed "hello from the plugin" to stdout before the go-plugin handshake`, "before agentkernel_plugin.serve() takes it over (log to stderr)"}},

		{"typescript prints before the handshake", func(t *testing.T) subprocess.PluginConfig {
			bundle := readFile(t, artifact(t, "bin/sdk/conformance-typescript/plugin.js"))
			return nodePlugin(t, "noisyts", "main.js", map[string]string{
				"main.js":        "console.log('hello from the plugin');\nrequire('./conformance.js');\n",
				"conformance.js": bundle,
			})
		}, []string{`start plugin "noisyts"`, `it printed "hello from the plugin" to stdout`, "before serve() (@agentkernel/plugin-sdk) takes it over"}},

		{"python speaks another protocol version", func(t *testing.T) subprocess.PluginConfig {
			return pythonPlugin(t, "future", "import sys, time\nsys.stdout.write('1|2|unix|/nonexistent/plugin|grpc|\\n'); sys.stdout.flush()\ntime.sleep(60)\n")
		}, []string{`start plugin "future"`, "protocol version mismatch", "rebuild the plugin against a compatible agentkernel SDK (sdk/python)"}},

		{"python announces a socket nobody serves", func(t *testing.T) subprocess.PluginConfig {
			return pythonPlugin(t, "hollow", "import os, sys, time\nsock = os.path.join(os.environ['PLUGIN_UNIX_SOCKET_DIR'], 'nobody')\n"+
				"sys.stdout.write('1|1|unix|' + sock + '|grpc|\\n'); sys.stdout.flush()\ntime.sleep(60)\n")
		}, []string{`start plugin "hollow"`, "it printed the go-plugin handshake but its health check failed", "is it built with the Python SDK"}},

		{"python is never healthy", func(t *testing.T) subprocess.PluginConfig {
			return pythonPlugin(t, "sick", "import agentkernel_plugin._serve as s\ns.HEALTH_STATUS = s.hp.HealthCheckResponse.NOT_SERVING\n"+sdkPy+
				"serve([tool(name='t', tier='read_only')(lambda a, c: '')])\n")
		}, []string{`start plugin "sick"`, "not healthy within 10s", "kept answering NOT_SERVING"}},

		{"python dies before the handshake", func(t *testing.T) subprocess.PluginConfig {
			return pythonPlugin(t, "broken", "import no_such_module\n")
		}, []string{`start plugin "broken"`, "the go-plugin handshake", "ModuleNotFoundError: No module named 'no_such_module'"}},

		{"python describes a schema that does not compile", func(t *testing.T) subprocess.PluginConfig {
			return pythonPlugin(t, "badschema", sdkPy+
				"serve([tool(name='t', tier='read_only', schema={'type': 'object', 'properties': {'a': {'type': 'nope'}}})(lambda a, c: '')])\n")
		}, []string{`plugin "badschema": tool "t": invalid schema`, "'/properties/a/type' does not validate"}},

		{"python describes a bad tier", func(t *testing.T) subprocess.PluginConfig {
			// The SDK refuses it first, and says so on stderr.
			return pythonPlugin(t, "badtier", sdkPy+"serve([tool(name='t', tier='harmless')(lambda a, c: '')])\n")
		}, []string{`start plugin "badtier"`, "tier 'harmless' is not one of read_only, side_effecting, privileged"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := load(t, c.cfg(t))
			if err == nil {
				t.Fatal("the plugin loaded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestTamperedScriptRefused: one byte changed in any file of a pinned
// plugin's directory (the script, the SDK it loads, the lock) and the
// plugin does not start, with the message a changed Go binary gets; the
// changed code never runs.
func TestTamperedScriptRefused(t *testing.T) {
	t.Parallel()
	needPython(t)
	mark := filepath.Join(t.TempDir(), "ran")
	tamper := "open(" + quote(mark) + ", 'w').write('tampered code ran')\n"
	for _, c := range []struct {
		name string
		edit func(t *testing.T, dir string)
		want string
	}{
		{"the script", func(t *testing.T, dir string) { prepend(t, filepath.Join(dir, "plugin.py"), tamper) },
			"plugin.py: sha256 mismatch"},
		{"the SDK it loads", func(t *testing.T, dir string) { prepend(t, filepath.Join(dir, "agentkernel_plugin/_tool.py"), tamper) },
			"_tool.py: sha256 mismatch"},
		{"the lock", func(t *testing.T, dir string) {
			p := filepath.Join(dir, subprocess.LockFile)
			b := []byte(readFile(t, p))
			b[0] ^= 1 // one hex digit of the first line
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "agentkernel.lock: sha256 mismatch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyFile(t, filepath.Join(root, "sdk/python/tests/conformance/plugin.py"), filepath.Join(dir, "plugin.py"), 0o644)
			copyTree(t, filepath.Join(root, "sdk/python/agentkernel_plugin"), filepath.Join(dir, "agentkernel_plugin"))
			sum, _, err := subprocess.WriteLock(dir)
			if err != nil {
				t.Fatal(err)
			}
			cfg := subprocess.PluginConfig{Name: "tampered", Path: filepath.Join(dir, "plugin.py"), SHA256: sum,
				Interpreter: &subprocess.Interpreter{Path: python}}
			if err := load(t, cfg); err != nil {
				t.Fatalf("before the change: %v", err)
			}
			c.edit(t, dir)
			err = load(t, cfg)
			if !errors.Is(err, subprocess.ErrHashMismatch) {
				t.Fatalf("err = %v, want ErrHashMismatch", err)
			}
			for _, w := range []string{`plugin "tampered"`, "refusing to run", c.want, "expected", "actual"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if _, err := os.Stat(mark); err == nil {
				t.Fatal("the tampered code ran")
			}
		})
	}
	t.Run("one byte of the TypeScript bundle", func(t *testing.T) {
		bundle := []byte(readFile(t, artifact(t, "bin/sdk/conformance-typescript/plugin.js")))
		cfg := nodePlugin(t, "tamperedts", "plugin.js", map[string]string{"plugin.js": string(bundle)})
		i := strings.Index(string(bundle), "Returns its text.")
		bundle[i] = 'r'
		if err := os.WriteFile(cfg.Path, bundle, 0o644); err != nil {
			t.Fatal(err)
		}
		err := load(t, cfg)
		if !errors.Is(err, subprocess.ErrHashMismatch) || !strings.Contains(err.Error(), "plugin.js: sha256 mismatch") {
			t.Fatalf("err = %v, want a sha256 mismatch of plugin.js", err)
		}
	})
}

// TestSwappedScriptNeverRuns: the host runs its verified copy of the
// plugin's directory, so a script replaced after the check (here, between
// the load and the first start) never runs, through restarts too.
func TestSwappedScriptNeverRuns(t *testing.T) {
	t.Parallel()
	cfg := pythonPlugin(t, "swapped", readFile(t, filepath.Join(root, "sdk/python/tests/conformance/plugin.py")))
	h := newHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tools, err := h.Load(ctx, cfg) // lazy, no cache: started once to describe
	if err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(t.TempDir(), "ran")
	if err := os.WriteFile(cfg.Path, []byte("open("+quote(mark)+", 'w').write('swapped')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		if tl.Spec().Name == "swapped.crash" {
			// A crash and a restart: the restart runs the copy too.
			_, _ = tl.Call(ctx, []byte(`{"text":"x"}`))
		}
	}
	for _, tl := range tools {
		if tl.Spec().Name == "swapped.echo" {
			res, err := tl.Call(ctx, []byte(`{"text":"still the pinned code"}`))
			if err != nil || res.Content != "still the pinned code" {
				t.Fatalf("echo = %q, %v", res.Content, err)
			}
		}
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the swapped script ran")
	}
}

// TestInterpreterChecks: the interpreter is named by an absolute path to a
// binary nobody else can change, and optionally pinned.
func TestInterpreterChecks(t *testing.T) {
	t.Parallel()
	base := conformancePlugin(t, "python")
	real, err := filepath.EvalSymlinks(python)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := fileSum(real)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(script, []byte("#!/usr/bin/python3.11\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	writable := filepath.Join(t.TempDir(), "python3")
	copyFile(t, real, writable, 0o775)
	for _, c := range []struct {
		name string
		in   subprocess.Interpreter
		want string
		is   error
	}{
		{"relative", subprocess.Interpreter{Path: "python3"}, `interpreter.path: "python3" is not an absolute path`, nil},
		{"missing", subprocess.Interpreter{Path: "/no/such/python3"}, "is it installed?", nil},
		{"a script", subprocess.Interpreter{Path: script}, "is a script (#!), not a binary", nil},
		{"writable by its group", subprocess.Interpreter{Path: writable}, "is writable by its group or others", nil},
		{"a wrong pin", subprocess.Interpreter{Path: python, SHA256: strings.Repeat("0", 64)}, "refusing to run the interpreter " + real + ": sha256 mismatch", subprocess.ErrHashMismatch},
		{"the right pin", subprocess.Interpreter{Path: python, SHA256: sum}, "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			in := c.in
			cfg.Interpreter = &in
			err := load(t, cfg)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `plugin "conf-py"`) {
				t.Fatalf("err = %v, want it to name the plugin and say %q", err, c.want)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Fatalf("err = %v, want %v", err, c.is)
			}
		})
	}
}

// TestScriptWithoutInterpreterRefused: a pinned script configured as a
// binary is still refused (what a wrapper runs is not pinned), and the
// error says how to configure it.
func TestScriptWithoutInterpreterRefused(t *testing.T) {
	t.Parallel()
	cfg := conformancePlugin(t, "python")
	p := filepath.Join(t.TempDir(), "plugin")
	if err := os.WriteFile(p, []byte("#!/usr/bin/python3\nimport plugin\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sum, err := fileSum(p)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Interpreter, cfg.Path, cfg.SHA256 = nil, p, sum
	err = load(t, cfg)
	if !errors.Is(err, subprocess.ErrWrapper) || !strings.Contains(err.Error(), "interpreter: {path: /usr/bin/node}") {
		t.Fatalf("err = %v, want ErrWrapper saying how to name the interpreter", err)
	}
}

// TestUnpinnedAndUnlocked: no lock, or no pin, is refused with what to run
// and what to paste.
func TestUnpinnedAndUnlocked(t *testing.T) {
	t.Parallel()
	cfg := conformancePlugin(t, "python")
	sum := cfg.SHA256
	cfg.SHA256 = ""
	err := load(t, cfg)
	if !errors.Is(err, subprocess.ErrNoPin) || !strings.Contains(err.Error(), "add `sha256: "+sum+"`") {
		t.Fatalf("err = %v, want ErrNoPin with the lock's sha256", err)
	}
	if err := os.Remove(filepath.Join(filepath.Dir(cfg.Path), subprocess.LockFile)); err != nil {
		t.Fatal(err)
	}
	cfg.SHA256 = sum
	err = load(t, cfg)
	if err == nil || !strings.Contains(err.Error(), "has no agentkernel.lock") || !strings.Contains(err.Error(), "kernel plugins lock "+filepath.Dir(cfg.Path)) {
		t.Fatalf("err = %v, want a missing lock that says how to make it", err)
	}
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

// prepend puts text in front of the file p and returns p.
func prepend(t *testing.T, p, text string) string {
	t.Helper()
	b := readFile(t, p)
	if err := os.WriteFile(p, []byte(text+b), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func fileSum(p string) (string, error) { return sdktest.FileSHA256(p) }

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(to, mode); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the regular files under from to to.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			if d.Name() == "__pycache__" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
