package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/policy"
)

// genCommandPolicy writes the policy a team generates from an inventory
// of commands: one regular-expression rule and one test per command.
func genCommandPolicy(t *testing.T, n int, edit string) string {
	t.Helper()
	var b, tests strings.Builder
	b.WriteString("name: generated\nrevision: \"1\"\ndefaults: {tool_call: allow}\nrules:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - id: cmd%d\n    effect: deny\n    when: call.command matches \"^tool%d( |$%s)\"\n", i, i, edit)
		fmt.Fprintf(&tests, "  - name: cmd%d\n    input: {call: {tool: run_command, args: {argv: [tool%d, x]}}}\n    expect: {decision: deny, rules: [cmd%d]}\n", i, i, i)
	}
	path := filepath.Join(t.TempDir(), "generated.yaml")
	if err := os.WriteFile(path, []byte(b.String()+"tests:\n"+tests.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPolicyTestCache: a kernel run takes the verdict of a policy's tests
// from the cache in the user's cache directory once the file has passed
// them; --no-cache and an edited file run them again; `policy check` uses
// the same cache.
func TestPolicyTestCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	file := genCommandPolicy(t, 300, "")
	script := filepath.Join(t.TempDir(), "answer.yaml")
	if err := os.WriteFile(script, []byte("steps:\n  - text: hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	run := func(file string, flags ...string) string {
		t.Helper()
		args := append([]string{"run", "--config", "../../examples/kernel.yaml", "--policy", file, "--script", script,
			"--store", store, "--log-level", "info"}, flags...)
		out, errOut, err := cli(t, append(args, "hi")...)
		if err != nil || !strings.Contains(out, "hello") {
			t.Fatalf("run: %v\nstdout %s\nstderr %s", err, out, errOut)
		}
		return errOut
	}
	if log := run(file); !strings.Contains(log, "policy loaded") || !strings.Contains(log, "tests=300 cached=false evaluated=") {
		t.Fatalf("first run:\n%s", log)
	}
	if m, _ := filepath.Glob(filepath.Join(cache, "agentkernel", "policy", "v3", "*.json")); len(m) != 1 {
		t.Fatalf("cache entries %v", m)
	}
	if log := run(file); !strings.Contains(log, "tests=300 cached=true evaluated=0") {
		t.Fatalf("second run: the tests ran again:\n%s", log)
	}
	if log := run(file, "--no-cache"); !strings.Contains(log, "cached=false") {
		t.Fatalf("--no-cache:\n%s", log)
	}
	edited := genCommandPolicy(t, 300, "|-")
	if log := run(edited); !strings.Contains(log, "cached=false") {
		t.Fatalf("edited file:\n%s", log)
	}
	out, _, err := cli(t, "policy", "check", "--config", "../../examples/kernel.yaml", edited)
	if err != nil || !strings.Contains(out, "300 tests; passed before, verdict from the test cache") {
		t.Fatalf("check: %v\n%s", err, out)
	}
	out, _, err = cli(t, "policy", "check", "--no-cache", "--config", "../../examples/kernel.yaml", edited)
	if err != nil || strings.Contains(out, "test cache") || !strings.Contains(out, "(300 tests)") {
		t.Fatalf("check --no-cache: %v\n%s", err, out)
	}
	// A cache directory others can write to is not used, and the run says so.
	dir := filepath.Join(cache, "agentkernel", "policy")
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if log := run(file); !strings.Contains(log, "cached=false") || !strings.Contains(log, "test cache not used") {
		t.Fatalf("open cache directory:\n%s", log)
	}
}

// TestPolicyCheckNamesTheConfig: without a configuration, a policy that
// uses tools the embedded defaults do not register gets one problem that
// names each tool once, and the configuration beside it that registers
// them.
func TestPolicyCheckNamesTheConfig(t *testing.T) {
	_, _, err := cli(t, "policy", "check", "--no-cache", "../../examples/policies/coding.yaml")
	if err == nil {
		t.Fatal("check passed without the tools")
	}
	msg := err.Error()
	abs, _ := filepath.Abs("../../examples/kernel.yaml")
	for _, want := range []string{"1 problem", "3 tools are not registered by the embedded defaults",
		"hint: " + abs + " registers run_command, write_file, edit_file: kernel policy check --config " + abs + " ../../examples/policies/coding.yaml"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if n := strings.Count(msg, "not registered"); n != 1 {
		t.Errorf("%d problems about unregistered tools, want 1:\n%s", n, msg)
	}
}

// TestPolicyProgressLine: on a terminal, a status line once the tests
// have run for two seconds, redrawn in place and cleared at the end; in a
// script (not a terminal), nothing.
func TestPolicyProgressLine(t *testing.T) {
	if progressLine(&bytes.Buffer{}) != nil {
		t.Fatal("progress drawn on a writer that is not a terminal")
	}
	var b bytes.Buffer
	draw := drawProgress(&b)
	draw(policy.TestProgress{File: "/x/gen.yaml", Done: 10, Total: 100, Elapsed: time.Second})
	if b.Len() != 0 {
		t.Fatalf("drawn before 2s: %q", b.String())
	}
	draw(policy.TestProgress{File: "/x/gen.yaml", Done: 40, Total: 100, Elapsed: 2 * time.Second})
	draw(policy.TestProgress{File: "/x/gen.yaml", Done: 40, Total: 100, Elapsed: 2100 * time.Millisecond}) // unchanged: not redrawn
	draw(policy.TestProgress{File: "/x/gen.yaml", Done: 90, Total: 100, Elapsed: 3 * time.Second})
	draw(policy.TestProgress{File: "/x/gen.yaml", Done: 100, Total: 100, Elapsed: 3 * time.Second, End: true})
	want := "\r\x1b[Kpolicy gen.yaml: testing 40/100\r\x1b[Kpolicy gen.yaml: testing 90/100\r\x1b[K"
	if b.String() != want {
		t.Fatalf("drawn %q, want %q", b.String(), want)
	}
}

// TestScaleWorkedExample runs the commands of docs/policy.md's worked
// example for authors at scale, as written (with a fresh cache and store,
// and the id of the session the run printed), and checks what the text
// says they print: the second check takes the verdict from the cache, and
// the diff prints the documented report, with the change expected (exit 0)
// and, without --expect, exit 1.
func TestScaleWorkedExample(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs/policy.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "### Diffs in review and CI")
	if start < 0 {
		t.Fatal("docs/policy.md has no section \"Diffs in review and CI\"")
	}
	section := text[start:]
	var cmds [][]string
	for _, m := range shBlock.FindAllStringSubmatch(section, 1) {
		for _, line := range strings.Split(m[1], "\n") {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "kernel ") {
				cmds = append(cmds, shellWords(line)[1:])
			}
		}
	}
	outputs := regexp.MustCompile("(?s)The diff finds the one call that\nchanges:\n\n```\n(.*?)```").FindStringSubmatch(section)
	if len(cmds) != 5 || outputs == nil {
		t.Fatalf("the worked example has %d commands (want 5) and output block %v", len(cmds), outputs != nil)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Chdir(root)
	scratch := t.TempDir()
	const exampleID = "06h06szknzfvyh41"
	id := ""
	var outs []string
	for i, args := range cmds {
		args = slices.Clone(args)
		for j, a := range args {
			switch {
			case a == "/tmp/scratch":
				args[j] = scratch
			case a == exampleID:
				args[j] = id
			}
		}
		out, errOut, err := cli(t, args...)
		if err != nil {
			t.Fatalf("command %d, kernel %s: %v\n%s\n%s", i+1, strings.Join(args, " "), err, out, errOut)
		}
		if m := sessionLine.FindStringSubmatch(errOut); m != nil {
			id = m[1]
		}
		outs = append(outs, out)
	}
	if !strings.Contains(outs[0], "ok  examples/scale/commands.yaml (7 tests)\n") ||
		!strings.Contains(outs[1], "ok  examples/scale/commands.yaml (7 tests; passed before, verdict from the test cache)") {
		t.Fatalf("checks:\n%s%s", outs[0], outs[1])
	}
	want := strings.ReplaceAll(outputs[1], exampleID, id)
	if !strings.Contains(outs[3], want) {
		t.Fatalf("the diff prints\n%s\nwhere docs/policy.md shows\n%s", outs[3], want)
	}
	if !strings.Contains(outs[4], "6 rules matched no call") {
		t.Fatalf("coverage:\n%s", outs[4])
	}
	noExpect := slices.DeleteFunc(slices.Clone(cmds[3]), func(a string) bool { return strings.HasPrefix(a, "allow:deny") || a == "--expect" })
	for j, a := range noExpect {
		if a == exampleID {
			noExpect[j] = id
		}
	}
	if _, _, err := cli(t, noExpect...); err == nil {
		t.Fatal("the diff without --expect exits 0")
	} else if code, _ := exitStatus(err); code != 1 {
		t.Fatalf("the diff without --expect: exit %d (%v), want 1", code, err)
	}
}

// TestPolicyCacheIsAKernelFile: the test cache can make a policy load
// without its tests, so it is one of the kernel's own files: with the
// cache directory inside the writable workspace the kernel refuses to
// start, naming it among the kernel's caches; --no-cache does not change
// that (the cache home is shared with every other configuration and
// kernel); caches elsewhere (XDG_CACHE_HOME) let it start.
func TestPolicyCacheIsAKernelFile(t *testing.T) {
	ws := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(ws, "cache"))
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"policy.yaml": "name: p\nrevision: \"1\"\ndefaults:\n  tool_call: allow\n",
		"script.yaml": "steps:\n  - text: done\n",
		"kernel.yaml": "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: " + ws + "\npolicy: {file: policy.yaml}\ntools:\n  builtin:\n    enable: [read_file, write_file]\n",
	})
	cfg := filepath.Join(dir, "kernel.yaml")
	for _, flags := range [][]string{nil, {"--no-cache"}} {
		_, _, err := cli(t, append(append([]string{"run", "--config", cfg}, flags...), "--store", t.TempDir(), "go")...)
		if !errors.Is(err, ErrProtectedWritable) || !strings.Contains(err.Error(), "the kernel's caches in "+filepath.Join(ws, "cache", "agentkernel")) ||
			!strings.Contains(err.Error(), "policy/ (policy test verdicts") {
			t.Fatalf("%v: started with the policy test cache inside the writable workspace: %v", flags, err)
		}
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	if _, errOut, err := cli(t, "run", "--config", cfg, "--store", t.TempDir(), "go"); err != nil {
		t.Fatalf("caches outside the workspace: %v\n%s", err, errOut)
	}
}
