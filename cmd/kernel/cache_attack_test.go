//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/cachemac"
	"github.com/agentkernel/agentkernel/plugins/wasm"
)

// textFixture is one of plugins/wasm's text modules: "hello" writes hello,
// "pwned" writes PWNED with machine code of the same layout.
func textFixture(t *testing.T, name string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "plugins", "wasm", "testdata", "text", name, "text.wasm")
}

// compiledEntry is the one compiled-code file under dir.
func compiledEntry(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && len(d.Name()) == 64 && !strings.Contains(d.Name(), ".") {
			out = append(out, p)
		}
		return nil
	})
	if len(out) != 1 {
		t.Fatalf("compiled entries under %s: %v", dir, out)
	}
	return out[0]
}

// grantTools are the two ways a configuration hands a confined native
// process a read-write grant that the cache checks must see: run_command's
// command_sandbox and a declared command tool's sandbox (tools.command).
var grantTools = []struct{ name, by, tools string }{
	{"run_command", "run_command's sandbox grant",
		"tools:\n  builtin:\n    enable: [read_file, run_command]\n    command_sandbox: {fs: [{path: GRANT, mode: rw}]}\n"},
	{"command tool", "command tool c's sandbox grant (tools.command)",
		"tools:\n  builtin: {enable: [read_file]}\n  command:\n    - {name: c, description: d, argv: [\"true\"], sandbox: {fs: [{path: GRANT, mode: rw}]}}\n"},
}

// TestCacheGrantRefusedAtStart is issue 36's first finding at the door: a
// sandbox grant that covers the kernel's caches (the whole cache home, as
// operators grant for pip, npm or go) stops the start with an error that
// names every cache and the fix; security.allow_writable does not accept
// it; nor does a grant of a directory inside the caches (the WASM cache's,
// the plugin binary store's). The same for
// run_command's grant and a declared command tool's. Without the caches
// among the kernel files this starts; without the command tools' grants
// among the writable areas, the command tool's cases start.
func TestCacheGrantRefusedAtStart(t *testing.T) {
	home := filepath.Join(t.TempDir(), "cache-home")
	t.Setenv("XDG_CACHE_HOME", home)
	caches := filepath.Join(home, "agentkernel")
	for _, tool := range grantTools {
		for name, tc := range map[string]struct{ grant, extra string }{
			"the cache home":            {home, ""},
			"the WASM cache itself":     {filepath.Join(caches, "wasm"), ""},
			"inside the WASM cache":     {filepath.Join(caches, "wasm", "v2"), ""},
			"with allow_writable":       {home, "security: {allow_writable: [" + caches + ", " + filepath.Join(caches, "wasm") + "]}\n"},
			"the policy cache, no WASM": {filepath.Join(caches, "policy"), ""},
			"the plugin binary store":   {filepath.Join(caches, "plugins", "bin", "v1"), ""},
		} {
			t.Run(tool.name+"/"+name, func(t *testing.T) {
				dir, ws := t.TempDir(), t.TempDir()
				os.MkdirAll(tc.grant, 0o700)
				writeFiles(t, dir, map[string]string{
					"script.yaml": "steps:\n  - text: done\n",
					"kernel.yaml": "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: " + ws + "\n" +
						strings.ReplaceAll(tool.tools, "GRANT", tc.grant) + tc.extra,
				})
				_, errOut, err := cli(t, "run", "--config", filepath.Join(dir, "kernel.yaml"), "--store", t.TempDir(), "go")
				if !errors.Is(err, ErrProtectedWritable) {
					t.Fatalf("started with the caches inside a read-write grant: %v\n%s", err, errOut)
				}
				for _, want := range []string{"the kernel's caches in " + caches, tool.by, "wasm/ (compiled WASM machine code",
					"policy/ (policy test verdicts", "mcp/ (MCP servers' tool lists", "plugins/ (plugins' tool lists", "verified copies of plugin binaries", "does not accept them", "XDG_CACHE_HOME"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("the refusal lacks %q:\n%v", want, err)
					}
				}
			})
		}
	}
}

// TestCacheAttackThroughRunCommand is issue 36's first finding end to end,
// as the red team played it: a confined run_command whose grant covers a
// kernel's WASM compilation cache replaces the compiled entry of the
// "hello" tool with the genuine compiled code of a module that writes
// "PWNED" (wazero's CRC is right: it is a real entry) and rewrites the
// cache's index for it. The grant check refuses such a configuration at
// start; here the grant comes from a run whose own caches are elsewhere
// (XDG_CACHE_HOME), which is what the check does not see: another
// configuration, another kernel sharing the cache home. The next start of
// the kernel that owns the cache discards the planted entry (its MAC does
// not verify), says so once, recompiles, and the tool writes "hello".
// Without the MAC the kernel runs the planted machine code, unconfined:
// the tool writes "PWNED".
func TestCacheAttackThroughRunCommand(t *testing.T) {
	cacheAttack(t, func(p plant) (string, string) {
		attack := "cp " + p.evil + " " + p.entry + " && cp " + p.index + " " + p.macFile + " && echo planted"
		return "tools:\n  builtin:\n    enable: [run_command]\n    command_sandbox: {fs: [{path: " + p.victimHome + ", mode: rw}]}\n",
			"steps:\n  - tool_calls:\n      - {name: run_command, args: {argv: [sh, -c, " + yamlDQuote(attack) + "]}}\n  - text: done\n"
	})
}

// TestCacheAttackThroughCommandTool is the same attack through a declared
// command tool (tools.command: cp with its two paths as arguments, never a
// shell) whose sandbox grant covers the victim's cache home: the grant
// check refuses it at start (TestCacheGrantRefusedAtStart's command tool
// cases); another kernel's run plants the entry and the index, and the
// MAC discards them. Without the MAC the victim writes "PWNED".
func TestCacheAttackThroughCommandTool(t *testing.T) {
	cacheAttack(t, func(p plant) (string, string) {
		return "tools:\n  builtin: {enable: [read_file]}\n  command:\n" +
				"    - name: copy\n      description: Copy a file.\n      argv: [cp, \"--\", \"{from}\", \"{to}\"]\n" +
				"      args: {type: object, required: [from, to], properties: {from: {type: string}, to: {type: string}}}\n" +
				"      sandbox: {fs: [{path: " + p.victimHome + ", mode: rw}]}\n",
			"steps:\n  - tool_calls:\n      - {name: copy, args: {from: " + yamlDQuote(p.evil) + ", to: " + yamlDQuote(p.entry) + "}}\n" +
				"      - {name: copy, args: {from: " + yamlDQuote(p.index) + ", to: " + yamlDQuote(p.macFile) + "}}\n  - text: done\n"
	})
}

// plant is what an attacker's run is given: the files the model wrote in
// the workspace (the attacker's compiled entry and index) and the victim's
// files to overwrite with them.
type plant struct {
	victimHome     string // the victim kernel's XDG_CACHE_HOME
	evil, index    string // in the workspace: the planted entry and its index
	entry, macFile string // in the victim's cache: the compiled entry and the index
}

// cacheAttack runs a victim kernel with a WASM tool, lets the attacker's
// configuration (attacker: its tools section and its script) overwrite the
// victim's compiled entry and index with a genuine compilation of the
// PWNED module and an index MACed with another key, and checks that the
// victim's next run discards them with one warning and runs "hello".
func cacheAttack(t *testing.T, attacker func(plant) (tools, script string)) {
	victimHome := filepath.Join(t.TempDir(), "victim-cache")
	hello, pwned := textFixture(t, "hello"), textFixture(t, "pwned")
	dir, ws := t.TempDir(), filepath.Join(t.TempDir(), "ws")
	os.MkdirAll(ws, 0o700)
	victim := "model: {provider: scripted, name: m, script: victim-script.yaml}\nworkspace: " + ws + "\n" +
		"tools:\n  builtin:\n    enable: [read_file]\n  wasm:\n    - {path: " + hello + "}\n"
	writeFiles(t, dir, map[string]string{
		"victim.yaml":        victim,
		"victim-script.yaml": "steps:\n  - tool_calls:\n      - {name: run, args: {}}\n  - text: done\n",
	})
	runVictim := func() (session, stderr string) {
		t.Helper()
		t.Setenv("XDG_CACHE_HOME", victimHome)
		store := t.TempDir()
		_, errOut, err := cli(t, "run", "--config", filepath.Join(dir, "victim.yaml"), "--store", store, "go")
		if err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		out, _, err := cli(t, "sessions", "show", "--full", "--store", store, sessionLine.FindStringSubmatch(errOut)[1])
		if err != nil {
			t.Fatal(err)
		}
		return out, errOut
	}
	out, _ := runVictim()
	if !strings.Contains(out, "hello") || strings.Contains(out, "PWNED") {
		t.Fatalf("the first run:\n%s", out)
	}
	entry := compiledEntry(t, filepath.Join(victimHome, "agentkernel", "wasm"))
	good, _ := os.ReadFile(entry)

	// The attacker's code: the same wazero's genuine compilation of the
	// PWNED module (same layout), which the model can make with any
	// wazero. It is placed in the workspace, where the model writes.
	evilDir := filepath.Join(t.TempDir(), "evil")
	h, err := wasm.NewHost(context.Background(), wasm.HostConfig{CacheDir: evilDir})
	if err != nil {
		t.Fatal(err)
	}
	tools, _, err := h.Load(context.Background(), wasm.ModuleConfig{Path: pwned})
	if err == nil {
		err = wasm.Ready(context.Background(), tools[0])
	}
	h.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	evil, err := os.ReadFile(compiledEntry(t, evilDir))
	if err != nil || len(evil) != len(good) || bytes.Equal(evil, good) {
		t.Fatalf("the attacker's entry (%d bytes) does not replace the %d-byte one: %v", len(evil), len(good), err)
	}
	// The index, rewritten the way the red team rewrote the CRC index:
	// a MAC needs the cache's key, so the attacker's is made with its own.
	modDir := filepath.Dir(filepath.Dir(entry))
	name := filepath.Base(filepath.Dir(entry)) + "/" + filepath.Base(entry)
	mac := cachemac.NewKey(bytes.Repeat([]byte{0x66}, 32), "wasm").SumLarge(cachemac.NewNonce(), evil, filepath.Base(modDir), name, fmt.Sprint(len(evil)))
	p := plant{victimHome: victimHome, evil: filepath.Join(ws, "evil.bin"), index: filepath.Join(ws, "entries.mac"),
		entry: entry, macFile: filepath.Join(modDir, "entries.mac")}
	os.WriteFile(p.evil, evil, 0o600)
	os.WriteFile(p.index, fmt.Appendf(nil, "%s %d %s\n", hex.EncodeToString(mac), len(evil), name), 0o600)

	// The attacker's run: confined, with a read-write grant over the
	// victim's cache home; this run's own caches are elsewhere.
	t.Setenv("XDG_CACHE_HOME", filepath.Join(t.TempDir(), "attacker-cache"))
	tl, script := attacker(p)
	writeFiles(t, dir, map[string]string{
		"attacker.yaml":        "model: {provider: scripted, name: m, script: attacker-script.yaml}\nworkspace: " + ws + "\n" + tl,
		"attacker-script.yaml": script,
	})
	runAndShow(t, filepath.Join(dir, "attacker.yaml"), "go")
	if b, _ := os.ReadFile(entry); !bytes.Equal(b, evil) {
		t.Fatal("the confined attacker could not replace the entry (the test's premise)")
	}
	if b, _ := os.ReadFile(p.macFile); !bytes.Equal(b, mustRead(t, p.index)) {
		t.Fatal("the confined attacker could not replace the index (the test's premise)")
	}

	out, stderr := runVictim()
	if strings.Contains(out, "PWNED") || !strings.Contains(out, "hello") {
		t.Fatalf("the kernel ran the planted machine code:\n%s", out)
	}
	if n := strings.Count(stderr, "failed its check and is discarded"); n != 1 {
		t.Errorf("%d warnings about the planted entry, want 1:\n%s", n, stderr)
	}
	if b, _ := os.ReadFile(entry); !bytes.Equal(b, good) {
		t.Error("the entry was not recompiled")
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
