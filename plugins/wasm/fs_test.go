package wasm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGuestFilesystem runs the escapes from inside a real guest (the
// attack fixture's fs tool, Go's os package over WASI) against the tree
// of escapeTree mounted at /data (rw) and /ro (ro).
func TestGuestFilesystem(t *testing.T) {
	root, mount, ro := escapeTree(t)
	h := newTestHost(t)
	tools, warnings := load(t, h, ModuleConfig{Path: attackWasm, Grants: Grants{FS: []FSGrant{
		{Guest: "/data", Host: mount, Mode: "rw"},
		{Guest: "/ro", Host: ro, Mode: "rw"}, // the manifest asks for ro: ro wins
	}}})
	if len(warnings) == 0 || !containsAny(warnings, "env AK_VISIBLE requested but not granted") {
		t.Errorf("warnings %q", warnings)
	}
	fsOp := func(op, path, target, data string) (string, bool) {
		t.Helper()
		args, _ := json.Marshal(map[string]string{"op": op, "path": path, "target": target, "data": data})
		res, err := tools["fs"].Call(t.Context(), args)
		if err != nil {
			t.Fatalf("fs %s %s: %v", op, path, err)
		}
		return res.Content, !res.IsError
	}

	allowed := []struct{ op, path, target, data, want string }{
		{"read", "/data/file.txt", "", "", "ok: inside"},
		{"read", "/data/inner", "", "", "ok: inside"},
		{"read", "/data/sub/../file.txt", "", "", "ok: inside"},
		{"read", "/ro/data.txt", "", "", "ok: read only"},
		{"write", "/data/out.txt", "", "written", "ok: "},
		{"append", "/data/out.txt", "", "+more", "ok: "},
		{"mkdir", "/data/newdir", "", "", "ok: "},
		{"symlink", "/data/down", "sub/nested.txt", "", "ok: "},
		{"read", "/data/down", "", "", "ok: nested"},
		{"link", "/data/hard.txt", "/data/file.txt", "", "ok: "},
		{"rename", "/data/hard.txt", "/data/sub/moved.txt", "", "ok: "},
		{"list", "/data/sub", "", "", "ok: moved.txt,nested.txt"},
	}
	for _, c := range allowed {
		if got, ok := fsOp(c.op, c.path, c.target, c.data); !ok || got != c.want {
			t.Errorf("%s %s %s: %q, want %q", c.op, c.path, c.target, got, c.want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(mount, "out.txt")); string(b) != "written+more" {
		t.Errorf("host sees out.txt = %q", b)
	}

	denied := []struct{ op, path, target string }{
		{"read", "/data/rel_escape", ""},
		{"read", "/data/abs_escape", ""},
		{"read", "/data/dir_escape/secret.txt", ""},
		{"read", "/data/../outside/secret.txt", ""},
		{"read", filepath.Join(root, "outside", "secret.txt"), ""},
		{"read", "/etc/passwd", ""},
		{"list", "/", ""},
		{"read", "/data/fifo", ""},
		{"write", "/data/rel_escape", ""},
		{"write", "/data/dir_escape/planted.txt", ""},
		{"symlink", "/data/evil", "../outside/secret.txt"},
		{"symlink", "/data/evil", filepath.Join(root, "outside", "secret.txt")},
		{"link", "/data/stolen.txt", filepath.Join(root, "outside", "secret.txt")},
		{"link", "/data/stolen.txt", "/ro/data.txt"},
		{"rename", "/data/file.txt", "/ro/file.txt"},
		{"rename", "/data/file.txt", "/data/../outside/x"},
		{"write", "/ro/new.txt", ""},
		{"append", "/ro/data.txt", ""},
		{"truncate", "/ro/data.txt", ""},
		{"mkdir", "/ro/dir", ""},
		{"remove", "/ro/data.txt", ""},
		{"rename", "/ro/data.txt", "/ro/renamed.txt"},
		{"symlink", "/ro/link", "data.txt"},
	}
	for _, c := range denied {
		if got, ok := fsOp(c.op, c.path, c.target, "pwned"); ok || strings.Contains(got, secret) {
			t.Errorf("%s %s %s: %q; want an error", c.op, c.path, c.target, got)
		}
	}

	if b, err := os.ReadFile(filepath.Join(root, "outside", "secret.txt")); err != nil || string(b) != secret {
		t.Errorf("outside/secret.txt is now %q, %v", b, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "outside")); len(ents) != 1 {
		t.Errorf("outside/ has %d entries, want only secret.txt", len(ents))
	}
	// WASI preview1 has no chmod: Go's os.Chmod reports success without
	// asking the host, and nothing changes.
	fsOp("chmod", "/ro/data.txt", "", "")
	if st, _ := os.Stat(filepath.Join(ro, "data.txt")); st.Mode().Perm() != 0o644 {
		t.Errorf("data.txt mode is %v", st.Mode())
	}
	ents, _ := os.ReadDir(ro)
	if b, _ := os.ReadFile(filepath.Join(ro, "data.txt")); len(ents) != 1 || string(b) != "read only" {
		t.Errorf("the ro mount changed: %d entries, data.txt = %q", len(ents), b)
	}
}
