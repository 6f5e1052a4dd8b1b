package main

import (
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/sdk/sdktest"

	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary act as the kernel CLI (KERNEL_TEST_MAIN=1),
// so signal tests run a real process without a separate build.
func TestMain(m *testing.M) {
	sandbox.Main() // a launcher nobody chose (see testLauncherEnv) re-executes this binary
	if os.Getenv("KERNEL_TEST_MAIN") == "1" {
		if l := os.Getenv(testLauncherEnv); l != "" {
			if err := sandbox.UseLauncher(l, ""); err != nil {
				fmt.Fprintln(os.Stderr, "kernel test process:", err)
				os.Exit(1)
			}
		}
		armFaults()
		main()
		os.Exit(0)
	}
	// The parallel tests mostly wait (see "Parallel tests" below): eight
	// at a time, unless -test.parallel is given.
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", "8")
	}
	// Sessions go to a private store, never the user's.
	dir, err := os.MkdirTemp("", "kernel-test-data")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_DATA_HOME", dir)
	// No user kernel.yaml is discovered from the developer's home.
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	launcherDir, err := os.MkdirTemp("", "kernel-test-launcher")
	if err != nil {
		panic(err)
	}
	if err := useBuiltLauncher(filepath.Join(launcherDir, sandbox.LauncherName)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	pgtest.StopShared()
	os.RemoveAll(dir)
	os.RemoveAll(launcherDir)
	os.Exit(code)
}

// testLauncherEnv names the sandbox launcher TestMain built for the kernel
// processes this package starts (KERNEL_TEST_MAIN=1, with the test's
// environment): they use it as this process does.
const testLauncherEnv = "AK_TEST_SANDBOX_LAUNCHER"

// useBuiltLauncher builds cmd/sandbox-init from this checkout to path and
// makes it the launcher of every sandbox this process and the kernel
// processes it starts (through testLauncherEnv) create: run_command,
// plugins, hooks. It is the dedicated launcher the kernel uses when built
// by make (a build from the same sources, so the code under test), and
// it replaces a re-execution of this race-built test binary, which costs
// every launch ~0.45 s of CPU and 180 MB to start (the package's init
// under -race). The go build reuses make build's compiled packages:
// ~0.5 s of CPU, once per run. RATIONALE.md, "cmd/kernel and
// sdk/langtest start the dedicated launcher (issue 45)".
func useBuiltLauncher(path string) error {
	if runtime.GOOS != "linux" {
		return nil // no launcher off Linux
	}
	if err := sdktest.BuildTo(path, "../sandbox-init", "-tags="+sandbox.LauncherBuildTag); err != nil {
		return fmt.Errorf("the sandbox launcher: %w", err)
	}
	if err := sandbox.UseLauncher(path, ""); err != nil {
		return err
	}
	return os.Setenv(testLauncherEnv, path)
}

// Parallel tests. Most of this package's time is waiting: on kernel
// processes, sandboxed commands, leases that must lapse, PostgreSQL. The
// slow tests that wait run in parallel (t.Parallel), after every
// sequential test has finished (that is how go test orders them), eight
// at a time (TestMain sets -test.parallel unless it is given; go test's
// default is GOMAXPROCS, two here). A test may be parallel
// only if it
//
//   - never changes the process's environment or working directory
//     (t.Setenv and t.Chdir panic in a parallel test, which enforces it);
//     a subprocess gets its variables in its own cmd.Env instead;
//   - keeps its state in its own directories: its own --store or
//     store.dir, never the shared default under $XDG_DATA_HOME that
//     TestMain sets (two in-process runs would open one Badger store);
//   - takes a database of its own (pgtest NewDatabase or Migrated) or a
//     PostgreSQL server of its own;
//   - changes no package variable (statusAfter, faults).
//
// cli runs the CLI in-process and returns stdout, stderr and the error.
func cli(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), err
}

const demoConfig = "testdata/basic/kernel.yaml"

func TestDemoRun(t *testing.T) {
	out, errOut, err := cli(t, "run", "--config", demoConfig, "What does this project do, and where is its entry point?")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	for _, want := range []string{"finds broken relative links", "Entry point: `cmd/linkcheck/main.go`"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"(new) · model demo-model", "[1/8] calling model", "→ list_dir", "✓ search", "completed · 4 turns"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestBadConfigNamesTheField(t *testing.T) {
	cases := map[string]struct{ yaml, want string }{
		"misspelt field": {"model:\n  name: m\n  provdier: openai\n", "bad.yaml:3:3: model.provdier: unknown field"},
		"wrong type":     {"limits:\n  max_turns: many\n", "bad.yaml:2:3: limits.max_turns: expected integer, got string"},
		"bad enum":       {"model:\n  provider: claude\n", "bad.yaml:2:3: model.provider: value must be one of"},
		"bad duration":   {"limits:\n  tool_timeout: 5 minutes\n", "bad.yaml:2:3: limits.tool_timeout: does not match pattern"},
		"unknown tool":   {"tools:\n  builtin:\n    enable: [read_file, rm_rf]\n", "bad.yaml:3:25: tools.builtin.enable[1]: value must be one of"},
		"not YAML":       {"model: [unclosed\n", "bad.yaml:1:8: did not find expected ',' or ']'"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := cli(t, "run", "--config", path, "hi")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestToolsList(t *testing.T) {
	out, _, err := cli(t, "tools", "--config", demoConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NAME", "read_file", "read_only", "builtin", "path*:string"} {
		if !strings.Contains(out, want) {
			t.Errorf("tools output lacks %q:\n%s", want, out)
		}
	}
	out, _, err = cli(t, "tools", "--config", demoConfig, "search")
	if err != nil {
		t.Fatal(err)
	}
	var specs []map[string]any
	if err := json.Unmarshal([]byte(out), &specs); err != nil || len(specs) != 1 || specs[0]["schema"] == nil {
		t.Fatalf("tools search = %s (%v)", out, err)
	}
}

func TestFlagsOverrideConfig(t *testing.T) {
	_, errOut, err := cli(t, "run", "--config", demoConfig, "--max-turns", "2", "What does it do?")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, "max_turns · 2 turns") {
		t.Fatalf("stderr:\n%s", errOut)
	}
}

func TestUsageErrors(t *testing.T) {
	if _, _, err := cli(t, "run", "--config", demoConfig); err == nil || !strings.Contains(err.Error(), "run needs a prompt") {
		t.Fatalf("no prompt: %v", err)
	}
	if _, _, err := cli(t, "frobnicate"); err == nil || !strings.Contains(err.Error(), `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: %v", err)
	}
	if _, _, err := cli(t, "run", "--provider", "scripted", "hi"); err == nil || !strings.Contains(err.Error(), "model.script") {
		t.Fatalf("scripted without a script: %v", err)
	}
}

func TestEventsAsJSONLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if _, _, err := cli(t, "run", "--config", demoConfig, "--events", path, "--quiet", "What does it do?"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var types []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct{ Type string }
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Type == "" {
			t.Fatalf("bad event line %q: %v", sc.Text(), err)
		}
		types = append(types, e.Type)
	}
	if types[0] != "run.started" || types[len(types)-1] != "run.completed" {
		t.Fatalf("event stream = %v", types)
	}
}

// TestInterruptCancelsCleanly runs the CLI as a real process, sends SIGINT
// while a tool is running and checks the run ends as cancelled with a
// result for every tool call.
func TestInterruptCancelsCleanly(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("script.yaml", "steps:\n  - tool_calls:\n      - name: run_command\n        args: {argv: [sleep, \"30\"]}\n  - text: unreachable\n")
	cfg := write("kernel.yaml", "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: ws\ntools:\n  builtin:\n    enable: [run_command]\n")
	events := filepath.Join(dir, "events.jsonl")
	cmd := exec.Command(os.Args[0], "run", "--config", cfg, "--events", events, "sleep please")
	cmd.Env = append(os.Environ(), "KERNEL_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(events)
		if bytes.Contains(b, []byte(`"type":"tool.started"`)) {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the tool never started:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 130 {
		t.Fatalf("exit = %v, want status 130\n%s", err, stderr.String())
	}
	b, _ := os.ReadFile(events)
	if !bytes.Contains(b, []byte(`"type":"tool.completed","call_id":"call_1_1","tool":"run_command","outcome":"cancelled"`)) ||
		!bytes.Contains(b, []byte(`"stop_reason":"cancelled"`)) {
		t.Fatalf("events after SIGINT:\n%s", b)
	}
	if !strings.Contains(stderr.String(), "kernel: cancelled") {
		t.Fatalf("stderr:\n%s", stderr.String())
	}
}
