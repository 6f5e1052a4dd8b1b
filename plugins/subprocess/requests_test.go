package subprocess_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sandbox"
)

// TestPluginRequestsIntersectGrant: a plugin that declares its requests
// (<binary>.sandbox.yaml) gets requested ∩ granted. A directory and a
// variable the config grants but the plugin did not request stay out of
// its reach (this fails if the requests are ignored), and each request the
// config does not grant is reported at load, naming the plugin.
func TestPluginRequestsIntersectGrant(t *testing.T) {
	d := secretDirs(t, 3)
	both, onlyGranted, onlyRequested := d[0], d[1], d[2]
	b, err := os.ReadFile(misbehave.path)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "mb")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	req := fmt.Sprintf("fs:\n  - {path: %s, mode: ro}\n  - {path: %s, mode: ro}\nenv: [MB_BOTH, MB_REQUESTED]\n", both, onlyRequested)
	if err := os.WriteFile(bin+subprocess.RequestsSuffix, []byte(req), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MB_BOTH", "value-both")
	t.Setenv("MB_GRANTED", "value-granted")
	t.Setenv("MB_REQUESTED", "value-requested")
	var mu sync.Mutex
	var notices []string
	h := newHost(t, subprocess.HostConfig{OnNotice: func(n kernel.Notice) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, n.Level+": "+n.Text)
	}})
	cfg := misbehaveConfig()
	cfg.Path = bin
	cfg.Env = []string{"MB_BOTH", "MB_GRANTED"}
	cfg.Sandbox = sandbox.Grant{FS: []sandbox.FSRule{{Path: both, Mode: "ro"}, {Path: onlyGranted, Mode: "ro"}}}
	tools := load(t, h, cfg)

	if got := mustCall(t, tools["mb.read"], fmt.Sprintf(`{"text":%q}`, filepath.Join(both, "f"))); !strings.HasPrefix(got, "secret-") {
		t.Fatalf("requested and granted directory not readable: %q", got)
	}
	for _, d := range []string{onlyGranted, onlyRequested} {
		res, err := call(t, tools["mb.read"], fmt.Sprintf(`{"text":%q}`, filepath.Join(d, "f")))
		if !refused(err) {
			t.Fatalf("read %s (not in requested ∩ granted): want it refused, got %v %q", d, err, res.Content)
		}
	}
	env := mustCall(t, tools["mb.env"], `{}`)
	if !strings.Contains(env, "value-both") || strings.Contains(env, "value-granted") || strings.Contains(env, "value-requested") {
		t.Fatalf("environment is not requested ∩ granted: %s", env)
	}
	mu.Lock()
	all := strings.Join(notices, "\n")
	mu.Unlock()
	for _, want := range []string{"warn: plugin mb: fs " + onlyRequested + " (ro) requested but not granted", "warn: plugin mb: env MB_REQUESTED requested but not granted"} {
		if !strings.Contains(all, want) {
			t.Errorf("no load warning %q in:\n%s", want, all)
		}
	}
}

// secretDirs makes n directories, each with a file f holding "secret-...".
func secretDirs(t *testing.T, n int) []string {
	t.Helper()
	var dirs []string
	for range n {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, "f"), []byte("secret-"+filepath.Base(d)), 0o600); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	return dirs
}

// TestRequestPathsRelativeAndResolved: a relative request is relative to
// the request file's directory, and a request through a symlink is
// compared where the link leads: a link inside the granted plugin
// directory that points outside it is refused (this fails if the
// comparison is lexical), while a real subdirectory is granted.
func TestRequestPathsRelativeAndResolved(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "plugin")
	req := "fs:\n  - {path: data, mode: ro}\n  - {path: escape, mode: rw}\n  - {path: ../elsewhere, mode: ro, optional: true}\n"
	if err := os.WriteFile(bin+subprocess.RequestsSuffix, []byte(req), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := subprocess.PluginConfig{Name: "p", Path: bin, Sandbox: sandbox.Grant{FS: []sandbox.FSRule{{Path: dir, Mode: "rw"}}}}
	eff, warn, err := subprocess.EffectiveConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	realData, _ := filepath.EvalSymlinks(filepath.Join(dir, "data"))
	var paths []string
	for _, r := range eff.Sandbox.FS {
		paths = append(paths, r.Path+":"+r.Mode)
		if r.Path == outside || strings.HasPrefix(r.Path, outside+"/") {
			t.Errorf("the link led the grant outside the plugin directory: %v", eff.Sandbox.FS)
		}
	}
	if len(eff.Sandbox.FS) != 1 || eff.Sandbox.FS[0].Path != realData || eff.Sandbox.FS[0].Mode != "ro" {
		t.Fatalf("effective fs %v, want only %s:ro", paths, realData)
	}
	if len(warn) != 2 || !strings.Contains(strings.Join(warn, "\n"), "not granted") {
		t.Fatalf("warnings %q: want the link and ../elsewhere reported as not granted", warn)
	}
}

// refused reports whether a plugin's read failed because the sandbox
// keeps the path out of reach: absent from its file system view (what
// is not granted is not there), or denied by Landlock.
func refused(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "no such file or directory") || strings.Contains(err.Error(), "permission denied"))
}
