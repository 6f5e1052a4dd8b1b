package wasm

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestIntersect(t *testing.T) {
	req := requested{
		FS:             []mountRequest{{Guest: "/data", Mode: "ro"}, {Guest: "/out", Mode: "rw"}, {Guest: "/cache", Mode: "rw"}},
		Env:            []string{"TZ", "LANG"},
		Clock:          true,
		Random:         true,
		MemoryMB:       256,
		timeout:        30 * time.Second,
		MaxOutputBytes: 1000,
	}
	for _, tc := range []struct {
		name     string
		grants   Grants
		desc     string
		warnings []string
	}{
		{
			name: "nothing granted",
			desc: "memory=64MiB timeout=10s output=1000B",
			warnings: []string{
				"fs /data (ro) requested but not granted: the guest will not see it",
				"fs /out (rw) requested but not granted: the guest will not see it",
				"fs /cache (rw) requested but not granted: the guest will not see it",
				"env TZ requested but not granted: the guest will not see it",
				"env LANG requested but not granted: the guest will not see it",
				"clock requested but not granted: the guest sees a fake clock and sleeping returns at once",
				"random requested but not granted: the guest gets a deterministic stream",
				"memory_mb 256 requested but 64 granted",
				"timeout 30s requested but 10s granted",
			},
		},
		{
			name: "everything granted, some of it narrower",
			grants: Grants{
				FS:    []FSGrant{{Guest: "/data", Host: "/srv/d", Mode: "rw"}, {Guest: "/out", Host: "/srv/o", Mode: "ro"}, {Guest: "/cache", Host: "/srv/c", Mode: "rw"}, {Guest: "/extra", Host: "/srv/e"}},
				Env:   map[string]string{"TZ": "UTC", "LANG": "C", "HOME": "/root"},
				Clock: true, Random: true, MemoryMB: 512, Timeout: Duration(5 * time.Second), MaxOutputBytes: 1 << 20,
			},
			desc: "fs=/data:ro,/out:ro,/cache:rw env=LANG,TZ clock random memory=256MiB timeout=5s output=1000B",
			warnings: []string{
				"fs /out requested rw but granted ro: writes will fail",
				"grant fs /extra is not requested by the manifest: ignored",
				"grant env HOME is not requested by the manifest: ignored",
				"timeout 30s requested but 5s granted",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eff, warnings := intersect(&req, &tc.grants)
			if got := eff.String(); got != tc.desc {
				t.Errorf("capabilities %q, want %q", got, tc.desc)
			}
			if !slices.Equal(warnings, tc.warnings) {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(warnings, "\n"), strings.Join(tc.warnings, "\n"))
			}
		})
	}
}

func TestIntersectUnrequestedGrants(t *testing.T) {
	eff, warnings := intersect(&requested{}, &Grants{Clock: true, Random: true})
	if eff.clock || eff.random {
		t.Fatal("granted what the manifest did not ask for")
	}
	if len(warnings) != 2 {
		t.Errorf("warnings %q", warnings)
	}
}

func TestModuleConfigYAML(t *testing.T) {
	const doc = `
- name: jq
  path: wasm-tools/jq/jq.wasm
  sha256: 2b1c8a5d0f3e6a7b9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b
  pool: 2
  grants:
    fs: [{guest: /data, host: ./data, mode: ro}]
    env: {TZ: UTC}
    clock: true
    memory_mb: 128
    timeout: 5s
    max_output_bytes: 65536
`
	var mcs []ModuleConfig
	if err := yaml.Unmarshal([]byte(doc), &mcs); err != nil {
		t.Fatal(err)
	}
	mc := mcs[0]
	g := mc.Grants
	if mc.Name != "jq" || mc.Pool != 2 || g.FS[0].Host != "./data" || g.Env["TZ"] != "UTC" || !g.Clock ||
		g.MemoryMB != 128 || time.Duration(g.Timeout) != 5*time.Second || g.MaxOutputBytes != 65536 {
		t.Fatalf("decoded %+v", mc)
	}
	if err := mc.validate(); err != nil {
		t.Fatal(err)
	}
	// The same shape as JSON (the kernel validates config as JSON).
	b, err := json.Marshal(mc)
	if err != nil {
		t.Fatal(err)
	}
	var back ModuleConfig
	if err := json.Unmarshal(b, &back); err != nil || time.Duration(back.Grants.Timeout) != 5*time.Second {
		t.Fatalf("JSON round trip: %s, %v", b, err)
	}

	var bad []ModuleConfig
	err = yaml.Unmarshal([]byte("- path: x.wasm\n  grants:\n    timeout: soon\n"), &bad)
	if err == nil || !strings.Contains(err.Error(), `line 3: invalid duration "soon"`) {
		t.Errorf("bad duration: %v", err)
	}
}

func TestModuleConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		mc   ModuleConfig
		want string
	}{
		{ModuleConfig{}, "path: is required"},
		{ModuleConfig{Path: "x", SHA256: "abc"}, `sha256: "abc" is not 64 hex digits`},
		{ModuleConfig{Path: "x", Pool: -1}, "pool: -1 is not between 0 and 64"},
		{ModuleConfig{Path: "x", Grants: Grants{FS: []FSGrant{{Guest: "data", Host: "/d"}}}}, `grants.fs[0].guest: "data" is not absolute`},
		{ModuleConfig{Path: "x", Grants: Grants{FS: []FSGrant{{Guest: "/", Host: "/d"}}}}, `grants.fs[0].guest: "/" cannot be a mount`},
		{ModuleConfig{Path: "x", Grants: Grants{FS: []FSGrant{{Guest: "/d", Host: "/a"}, {Guest: "/d", Host: "/b"}}}}, "grants.fs[1].guest: /d is granted twice"},
		{ModuleConfig{Path: "x", Grants: Grants{FS: []FSGrant{{Guest: "/d"}}}}, "grants.fs[0].host: is required"},
		{ModuleConfig{Path: "x", Grants: Grants{FS: []FSGrant{{Guest: "/d", Host: "/d", Mode: "w"}}}}, `grants.fs[0].mode: "w" is not ro or rw`},
		{ModuleConfig{Path: "x", Grants: Grants{Env: map[string]string{"A=B": "x"}}}, `grants.env: "A=B" is not a valid`},
		{ModuleConfig{Path: "x", Grants: Grants{MemoryMB: 5000}}, "grants.memory_mb: 5000 is not between 1 and 4096"},
		{ModuleConfig{Path: "x", Grants: Grants{MaxOutputBytes: -1}}, "grants.max_output_bytes: -1 is negative"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			err := tc.mc.validate()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/var/cache/me")
	if d, err := DefaultCacheDir(); err != nil || d != "/var/cache/me/agentkernel/wasm" {
		t.Errorf("with XDG_CACHE_HOME: %q, %v", d, err)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/me")
	if d, err := DefaultCacheDir(); err != nil || d != "/home/me/.cache/agentkernel/wasm" {
		t.Errorf("without: %q, %v", d, err)
	}
	t.Setenv("XDG_CACHE_HOME", "relative")
	if _, err := DefaultCacheDir(); err == nil {
		t.Error("a relative XDG_CACHE_HOME was accepted")
	}
}
