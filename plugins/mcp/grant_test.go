package mcp

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/hostpath"
	"github.com/agentkernel/agentkernel/sandbox"
)

// TestStdioGrantReadsTheServersOwnFiles: a server run as [node,
// .../node_modules/.bin/NAME, {workspace}] may read the .bin link, the
// script it leads to and the node_modules tree its dependencies are
// hoisted into, with no grant; a file the operator's grant lets it write
// stays writable (no read-only rule over it).
func TestStdioGrantReadsTheServersOwnFiles(t *testing.T) {
	dir := t.TempDir()
	nm := filepath.Join(dir, "tools", "node_modules")
	for name, body := range map[string]string{
		"@scope/server/package.json":  `{"name": "@scope/server"}`,
		"@scope/server/dist/index.js": "#!/usr/bin/env node\n",
		"dep/index.js":                "",
	} {
		p := filepath.Join(nm, name)
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(nm, ".bin"), 0o700)
	link := filepath.Join(nm, ".bin", "server")
	if err := os.Symlink("../@scope/server/dist/index.js", link); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	os.MkdirAll(data, 0o700)
	db := filepath.Join(data, "db.json")
	os.WriteFile(db, []byte("{}"), 0o600)
	ws := t.TempDir()

	sc := ServerConfig{Name: "s", Command: []string{"sh", link, "{workspace}", "--db", db}}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("fs: [{path: "+strconv.Quote(data)+", mode: rw}]\n"), &n); err != nil {
		t.Fatal(err)
	}
	sc.Grant = *n.Content[0]
	cfg, err := sc.normalize(ws)
	if err != nil {
		t.Fatal(err)
	}
	g, err := StdioGrant(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ro := g.ReadOnlyPaths()
	for _, want := range []string{nm, ws} {
		if !slices.Contains(ro, want) {
			t.Errorf("read-only paths lack %s:\n%s", want, strings.Join(ro, "\n"))
		}
	}
	for _, want := range []string{link, filepath.Join(nm, "@scope", "server", "dist", "index.js"), filepath.Join(nm, "dep", "index.js")} {
		if !hostpath.Within(want, ro) {
			t.Errorf("%s is not readable:\n%s", want, strings.Join(ro, "\n"))
		}
	}
	if slices.Contains(ro, db) {
		t.Errorf("the file the grant lets the server write got a read-only rule: %v", ro)
	}
	if files, err := ProgramFiles(sc, ws); err != nil || !slices.Contains(files, link) || !slices.Contains(files, db) {
		t.Errorf("ProgramFiles = %v", files)
	}
}

// TestPermissionHint: a server that dies on a permission error is told
// the path and the exact grant line to add, for the runtimes MCP servers
// are written in.
func TestPermissionHint(t *testing.T) {
	for _, tc := range []struct{ stderr, line string }{
		{"Error: EACCES: permission denied, open '/opt/srv/dist/index.js'\n    at Object.readFileSync", "grant: {fs: [{path: /opt/srv/dist/index.js, mode: ro}]}"},
		{"Error: EACCES: permission denied, mkdir '/home/me/.cache/srv'", "grant: {fs: [{path: /home/me/.cache/srv, mode: rw}]}"},
		{"PermissionError: [Errno 13] Permission denied: '/srv/app/server.py'", "grant: {fs: [{path: /srv/app/server.py, mode: ro}]}"},
		{"sh: 0: cannot open /srv/run.sh: Permission denied", "grant: {fs: [{path: /srv/run.sh, mode: ro}]}"},
		{"/usr/local/bin/srv: /srv/conf.toml: Permission denied", "grant: {fs: [{path: /srv/conf.toml, mode: ro}]}"},
		{"panic: something else", ""},
	} {
		got := permissionHint("s", tc.stderr)
		if tc.line == "" {
			if got != "" {
				t.Errorf("%q: unexpected hint %q", tc.stderr, got)
			}
			continue
		}
		if !strings.Contains(got, tc.line) || !strings.Contains(got, "name: s") {
			t.Errorf("%q: hint %q lacks %q", tc.stderr, got, tc.line)
		}
	}
}

// TestGrantPlaceNamesTheConfiguredRule: the sandbox names a missing path
// by its index in the grant StdioGrant built ("fs[38]", after the system
// directories and the server's own files); the error the operator reads
// names the rule of the server's own grant instead, or says the rule is
// one the kernel adds.
func TestGrantPlaceNamesTheConfiguredRule(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent")
	sc := ServerConfig{Name: "uv", Command: []string{"sh", "-c", "true"}}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("fs: [{path: /tmp, mode: ro}, {path: "+strconv.Quote(missing)+", mode: rw}]\n"), &n); err != nil {
		t.Fatal(err)
	}
	sc.Grant = *n.Content[0]
	cfg, err := sc.normalize(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g, err := StdioGrant(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	last := len(g.FS) - 1
	if g.FS[last].Path != missing || last < 2 {
		t.Fatalf("the grant's last rule is %+v of %d; want the configured %s after the defaults", g.FS[last], len(g.FS), missing)
	}
	err = grantPlace(fmt.Errorf("start: %w", &sandbox.GrantError{Field: fmt.Sprintf("fs[%d].path", last), Msg: "stat " + missing + ": no such file or directory"}), g, cfg)
	if got := err.Error(); !strings.Contains(got, "grant.fs[1].path (tools.mcp, server uv)") || strings.Contains(got, fmt.Sprintf("fs[%d]", last)) {
		t.Errorf("a configured rule: %s", got)
	}
	err = grantPlace(&sandbox.GrantError{Field: "fs[0].path", Msg: "stat: gone"}, g, cfg)
	if got := err.Error(); !strings.Contains(got, "the default grant's rule for "+g.FS[0].Path) {
		t.Errorf("a rule the kernel adds: %s", got)
	}
}
