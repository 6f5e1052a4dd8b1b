package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/plugins/wasm"
	"github.com/agentkernel/agentkernel/plugins/wasm/wasmtest"
)

// copyModule writes the snapshot js.wasm, changed by edit, and a tool.json
// changed by caps (merged into its capabilities) into a directory of its
// own, and returns the module's path.
func copyModule(t *testing.T, edit func([]byte) []byte, caps map[string]any) string {
	t.Helper()
	bin, err := os.ReadFile(module)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		bin = edit(bin)
	}
	raw, err := os.ReadFile("tool.json")
	if err != nil {
		t.Fatal(err)
	}
	var man map[string]any
	if err := json.Unmarshal(raw, &man); err != nil {
		t.Fatal(err)
	}
	delete(man, "$schema")
	c := man["capabilities"].(map[string]any)
	for k, v := range caps {
		c[k] = v
	}
	dir := t.TempDir()
	out, _ := json.Marshal(man)
	if err := os.WriteFile(filepath.Join(dir, "tool.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "js.wasm")
	if err := os.WriteFile(p, bin, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func loadJS(t *testing.T, path string, g wasm.Grants) (*wasm.Host, func(code string) (string, error)) {
	t.Helper()
	ctx := context.Background()
	h, err := wasm.NewHost(ctx, wasm.HostConfig{CacheDir: wasmtest.CacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	g.MemoryMB, g.Timeout = 96, wasm.Duration(time.Minute)
	tools, _, err := h.Load(ctx, wasm.ModuleConfig{Path: path, Grants: g})
	if err != nil {
		t.Fatal(err)
	}
	return h, func(code string) (string, error) {
		args, _ := json.Marshal(map[string]string{"code": code})
		res, err := tools[0].Call(ctx, args)
		if err != nil {
			return "", err
		}
		if res.IsError {
			return "", errors.New(res.Content)
		}
		return string(decode(t, res.Content).Value), nil
	}
}

// TestShippedModuleIsASnapshot: the module the tests (and make) run is
// the pre-initialised image, made from the reactor the tests built.
func TestShippedModuleIsASnapshot(t *testing.T) {
	bin, err := os.ReadFile(module)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(bin, []byte("\x14agentkernel.snapshot{")) {
		t.Fatalf("%s is not a snapshot", module)
	}
}

// TestSnapshotRandomDiffers: with random granted, the first Math.random()
// of two fresh instances of the snapshot differ, though every instance
// starts from the same image (the Go runtime's and math/rand's seeds
// frozen in it): js seeds Math.random from crypto/rand per evaluation.
func TestSnapshotRandomDiffers(t *testing.T) {
	_, call := loadJS(t, copyModule(t, nil, map[string]any{"random": true}), wasm.Grants{Random: true})
	seen := map[string]bool{}
	for range 3 {
		v, err := call("Math.random()")
		if err != nil {
			t.Fatal(err)
		}
		if seen[v] {
			t.Fatalf("two fresh instances' first Math.random() are both %s", v)
		}
		seen[v] = true
	}
}

// TestSnapshotTimeGoesOn: a fresh instance of the snapshot runs timers
// (the Go runtime recorded its start time in the image; a clock that
// started over would be before it) and its clock only moves forward.
func TestSnapshotTimeGoesOn(t *testing.T) {
	for _, clock := range []bool{false, true} {
		p := module
		if clock {
			p = copyModule(t, nil, map[string]any{"clock": true})
		}
		_, call := loadJS(t, p, wasm.Grants{Clock: clock})
		v, err := call("var a = Date.now(); var s = 0; for (var i = 0; i < 1000; i++) s += i; var b = Date.now(); [b >= a, s]")
		if err != nil {
			t.Fatalf("clock %v: %v", clock, err)
		}
		if v != "[true,499500]" {
			t.Fatalf("clock %v: got %s", clock, v)
		}
	}
}

// TestDamagedSnapshot: a snapshot whose section is damaged, or which is
// granted an environment it could not have read, fails to load with an
// error that names the file and the cause; nothing runs.
func TestDamagedSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
		caps map[string]any
		g    wasm.Grants
		want string
	}{
		{"unknown field", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"nanotime":`), []byte(`"nanotimX":`), 1)
		}, nil, wasm.Grants{}, "custom section agentkernel.snapshot is damaged"},
		{"other version", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`{"version":1,`), []byte(`{"version":7,`), 1)
		}, nil, wasm.Grants{}, "has version 7"},
		{"env granted", nil, map[string]any{"env": []string{"TZ"}}, wasm.Grants{Env: map[string]string{"TZ": "UTC"}}, "grants.env: the module is a snapshot"},
		{"fs granted", nil, map[string]any{"fs": []map[string]string{{"guest": "/data", "mode": "ro", "description": "data"}}},
			wasm.Grants{FS: []wasm.FSGrant{{Guest: "/data", Host: t.TempDir(), Mode: "ro"}}}, "grants.fs: the module is a snapshot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := copyModule(t, tc.edit, tc.caps)
			_, call := loadJS(t, p, tc.g)
			_, err := call("1")
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %s and %q", err, p, tc.want)
			}
		})
	}
}
