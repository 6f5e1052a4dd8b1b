package builtin

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// env is a workspace for one test: root is the workspace, outside a
// sibling directory the tools must never reach.
type env struct {
	root, outside string
	tools         map[string]kernel.Tool
}

const secret = "TOPSECRET-outside-the-workspace"

// newEnv makes base/ws (the root) and base/outside (holding secret.txt and
// dir/inner.txt, both containing the secret), and builds the tools.
func newEnv(t testing.TB, cfg Config) *env {
	t.Helper()
	base := t.TempDir()
	e := &env{root: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside")}
	mkfiles(t, e.outside, map[string]string{
		"secret.txt":    secret + "\n",
		"dir/inner.txt": secret + "\n",
	})
	if err := os.MkdirAll(e.root, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.Root = e.root
	tools, closer, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { closer.Close() })
	e.tools = map[string]kernel.Tool{}
	for _, tl := range tools {
		e.tools[tl.Spec().Name] = tl
	}
	return e
}

// mkfiles writes files (slash paths relative to dir) creating parents.
func mkfiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// symlink makes link (relative to dir) point to target, verbatim.
func symlink(t testing.TB, dir, target, link string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(link))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func (e *env) call(t testing.TB, name string, args any) (kernel.Result, error) {
	t.Helper()
	return e.callCtx(context.Background(), t, name, args)
}

func (e *env) callCtx(ctx context.Context, t testing.TB, name string, args any) (kernel.Result, error) {
	t.Helper()
	tl, ok := e.tools[name]
	if !ok {
		t.Fatalf("tool %s not built", name)
	}
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	return tl.Call(ctx, json.RawMessage(raw))
}

// mustCall calls a tool that must succeed.
func (e *env) mustCall(t testing.TB, name string, args any) string {
	t.Helper()
	res, err := e.call(t, name, args)
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return res.Content
}

func (e *env) read(t testing.TB, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// golden compares got with testdata/<name>, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	testutil.Golden(t, filepath.Join("testdata", name), got, *update)
}

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
}
