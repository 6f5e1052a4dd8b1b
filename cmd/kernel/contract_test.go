package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// status runs the CLI in-process and returns what main would exit with.
func status(t *testing.T, args ...string) (code int, stdout, stderr, msg string) {
	t.Helper()
	out, errOut, err := cli(t, args...)
	code, msg = exitStatus(err)
	return code, out, errOut, msg
}

// TestExitStatus is the CLI contract of README.md ("Exit status"): 2 for
// a wrong command line, 1 for a failure, 0 for success. 130 for an
// interrupt is TestInterruptExitsCleanly's (a real signal to a real process).
func TestExitStatus(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	cases := []struct {
		args []string
		code int
		want string // in the message or stderr
	}{
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"run", "--max-turns", "-1", "hi"}, 2, `invalid value "-1" for flag -max-turns: must be at least 1`},
		{[]string{"run", "--max-turns", "0", "hi"}, 2, `invalid value "0" for flag -max-turns: must be at least 1`},
		{[]string{"run", "--model-timeout", "0s", "hi"}, 2, "must be more than zero"},
		{[]string{"run", "--model-timeout", "-5m", "hi"}, 2, "must be more than zero"},
		{[]string{"run", "--provider", "bogus", "hi"}, 2, `invalid value "bogus" for flag -provider: want one of openai, anthropic, scripted`},
		{[]string{"run", "--log-level", "loud", "hi"}, 2, "want one of trace, debug, info, warn, error, off"},
		{[]string{"run", "--no-such-flag", "hi"}, 2, "flag provided but not defined: -no-such-flag"},
		{[]string{"run"}, 2, "run needs a prompt"},
		{[]string{"sessions", "ls", "--full"}, 2, "--full is not a flag of sessions ls (it belongs to show)"},
		{[]string{"sessions", "frob"}, 2, `unknown sessions subcommand "frob"`},
		{[]string{"completion", "tcsh"}, 2, `no completion for "tcsh"`},
		{[]string{"help", "frob"}, 2, `no command "frob"`},
		{[]string{"run", "--config", missing, "hi"}, 1, "read config"},
		{[]string{"sessions", "ls", "--store", "/typo-agentkernel-store"}, 1, "no session store at /typo-agentkernel-store"},
		{[]string{"tools", "no_such_tool"}, 1, `no tool "no_such_tool"`},
		{[]string{"version"}, 0, ""},
		{[]string{"--version"}, 0, ""},
		{[]string{"help"}, 0, ""},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr, msg := status(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d (msg %q, stderr %q)", code, tc.code, msg, stderr)
			}
			if !strings.Contains(msg+"\n"+stderr, tc.want) {
				t.Errorf("message %q / stderr %q lacks %q", msg, stderr, tc.want)
			}
		})
	}
}

// TestProviderFlagNamesTheFlag: a bad --provider blames the flag, not the
// embedded defaults.
func TestProviderFlagNamesTheFlag(t *testing.T) {
	_, _, stderr, msg := status(t, "run", "--provider", "bogus", "hi")
	if strings.Contains(msg+stderr, "embedded defaults") {
		t.Fatalf("blames the defaults: %q %q", msg, stderr)
	}
}

// TestHelpIsPerCommand: `kernel help CMD` and `kernel CMD --help` print that
// command's usage and its own flags on stdout, not the general help.
func TestHelpIsPerCommand(t *testing.T) {
	for _, args := range [][]string{{"help", "run"}, {"run", "--help"}, {"run", "-h"}} {
		code, out, stderr, _ := status(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		if !strings.HasPrefix(out, "Usage: kernel run ") || !strings.Contains(out, "--max-turns") || !strings.Contains(out, "--quiet") {
			t.Errorf("%v: stdout is not run's help:\n%s", args, out)
		}
		if strings.Contains(out, "Commands:") || stderr != "" {
			t.Errorf("%v: general help or stderr output:\n%s\n%s", args, out, stderr)
		}
	}
	// A group's subcommand lists only its own flags.
	_, out, _, _ := status(t, "help", "sessions", "ls")
	if !strings.Contains(out, "--json") || strings.Contains(out, "--full") || strings.Contains(out, "--older-than") {
		t.Errorf("help sessions ls:\n%s", out)
	}
	_, out, _, _ = status(t, "sessions", "show", "--help")
	if !strings.Contains(out, "--full") || strings.Contains(out, "--older-than") {
		t.Errorf("sessions show --help:\n%s", out)
	}
	// A bad flag says where the help is instead of printing all of it.
	_, _, stderr, _ := status(t, "run", "--bogus", "x")
	if !strings.Contains(stderr, "kernel help run") || strings.Contains(stderr, "--max-turns") {
		t.Errorf("bad flag stderr:\n%s", stderr)
	}
}

func TestVersionFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/agentkernel/agentkernel", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-23T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	got := versionFrom(bi, true).String()
	if !strings.HasPrefix(got, "kernel v1.2.3 (0123456789ab, modified, 2026-11-23T10:00:00Z) go") {
		t.Errorf("version = %q", got)
	}
	if v := versionFrom(nil, false); v.Version != "unknown" {
		t.Errorf("without build info: %+v", v)
	}
	// The test binary itself: whatever it has, never the old fixed "dev".
	_, out, _, _ := status(t, "version", "--json")
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Version == "" || v.Version == "dev" || v.Go == "" {
		t.Errorf("version --json = %q (%v)", out, err)
	}
}

// TestCompletion: the scripts are generated from the command table, so
// every command, subcommand and flag is there, and each is valid shell.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			code, out, stderr, msg := status(t, "completion", shell)
			if code != 0 {
				t.Fatalf("exit %d: %s %s", code, msg, stderr)
			}
			for _, c := range commands() {
				if !strings.Contains(out, c.name) {
					t.Errorf("no command %s", c.name)
				}
			}
			for _, want := range []string{"max-turns", "older-than", "gc", "replay", "show", "log-level"} {
				if !strings.Contains(out, want) {
					t.Errorf("lacks %q", want)
				}
			}
			sh, err := exec.LookPath(shell)
			if err != nil {
				t.Skipf("%s is not installed: syntax not checked", shell)
			}
			f := filepath.Join(t.TempDir(), "completion")
			os.WriteFile(f, []byte(out), 0o600)
			if b, err := exec.Command(sh, "-n", f).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s", shell, err, b)
			}
		})
	}
}

// TestDescribeNewCommand: a command added to the table that parses its
// flags with newFlagSet gets help and completion without more code.
func TestDescribeNewCommand(t *testing.T) {
	c := command{name: "frob", summary: "frobnicate things", run: func(ctx context.Context, args []string, env *cliEnv) error {
		fs := newFlagSet("frob", "", env.stderr)
		fs.Int("widgets", 1, "how many")
		_, err := parseArgs(fs, args)
		return err
	}}
	d := describe(t.Context(), c)
	if len(d.flags) != 1 || d.flags[0].Name != "widgets" {
		t.Fatalf("flags = %+v", d.flags)
	}
	var b strings.Builder
	writeBashCompletion(&b, []describedCommand{d})
	if !strings.Contains(b.String(), "--widgets") {
		t.Fatalf("bash completion lacks --widgets:\n%s", b.String())
	}
}

// TestInitWritesOutsideTheWorkspace: `kernel init` writes a kernel.yaml
// that loads and a starter policy whose own tests pass against it, and
// refuses to put them inside the workspace.
func TestInitWritesOutsideTheWorkspace(t *testing.T) {
	dir := t.TempDir()
	ws, conf := filepath.Join(dir, "project"), filepath.Join(dir, "agent")
	os.MkdirAll(ws, 0o700)
	code, out, stderr, msg := status(t, "init", "--dir", conf, "--workspace", ws)
	if code != 0 {
		t.Fatalf("init: exit %d %s %s", code, msg, stderr)
	}
	for _, f := range []string{"kernel.yaml", "policy.yaml"} {
		if !strings.Contains(out, filepath.Join(conf, f)) {
			t.Errorf("init did not report %s: %s", f, out)
		}
	}
	cfgFile := filepath.Join(conf, "kernel.yaml")
	code, out, stderr, msg = status(t, "config", "show", "--config", cfgFile)
	if code != 0 || !strings.Contains(out, "workspace: "+ws) || !strings.Contains(out, filepath.Join(conf, "policy.yaml")) {
		t.Fatalf("config show: exit %d %s %s\n%s", code, msg, stderr, out)
	}
	code, out, stderr, msg = status(t, "policy", "test", "--config", cfgFile, filepath.Join(conf, "policy.yaml"))
	if code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("starter policy tests: exit %d %s %s\n%s", code, msg, stderr, out)
	}
	// Again: the files exist.
	if code, _, _, msg := status(t, "init", "--dir", conf, "--workspace", ws); code != 1 || !strings.Contains(msg, "--force") {
		t.Errorf("second init: exit %d %q", code, msg)
	}
	// Inside the workspace: refused.
	if code, _, _, msg := status(t, "init", "--dir", filepath.Join(ws, ".agent"), "--workspace", ws); code != 2 || !strings.Contains(msg, "inside the workspace") {
		t.Errorf("init inside the workspace: exit %d %q", code, msg)
	}
	if _, err := os.Stat(filepath.Join(ws, ".agent")); err == nil {
		t.Error("init wrote into the workspace")
	}
}

// TestConfigDiscovery: without --config, the user's file and then
// ./kernel.yaml are laid over the defaults (the project's wins), flags win
// over both, and --config replaces discovery.
func TestConfigDiscovery(t *testing.T) {
	dir := t.TempDir()
	xdg, proj := filepath.Join(dir, "xdg"), filepath.Join(dir, "proj")
	os.MkdirAll(filepath.Join(xdg, "agentkernel"), 0o700)
	os.MkdirAll(proj, 0o700)
	os.WriteFile(filepath.Join(xdg, "agentkernel", "kernel.yaml"), []byte("model:\n  name: user-model\nlimits:\n  max_turns: 3\n"), 0o600)
	os.WriteFile(filepath.Join(proj, "kernel.yaml"), []byte("model:\n  name: project-model\n"), 0o600)
	t.Setenv("XDG_CONFIG_HOME", xdg)
	t.Chdir(proj)

	_, out, _, msg := status(t, "config", "show")
	for _, want := range []string{filepath.Join(xdg, "agentkernel", "kernel.yaml"), filepath.Join(proj, "kernel.yaml"), "name: project-model", "max_turns: 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("config show lacks %q (%s):\n%s", want, msg, out)
		}
	}
	if strings.Index(out, filepath.Join(xdg, "agentkernel")) > strings.Index(out, filepath.Join(proj, "kernel.yaml")) {
		t.Errorf("layers out of order:\n%s", out)
	}
	_, out, _, _ = status(t, "config", "show", "--model", "flag-model", "--max-turns", "5")
	if !strings.Contains(out, "name: flag-model") || !strings.Contains(out, "max_turns: 5") {
		t.Errorf("flags do not win:\n%s", out)
	}
	other := filepath.Join(dir, "other.yaml")
	os.WriteFile(other, []byte("limits:\n  max_turns: 4\n"), 0o600)
	_, out, _, _ = status(t, "config", "show", "--config", other)
	if strings.Contains(out, "project-model") || strings.Contains(out, "user-model") || !strings.Contains(out, "max_turns: 4") {
		t.Errorf("--config does not replace discovery:\n%s", out)
	}
}

// TestScriptedRunIsNotLabelledAsOpenAI: --script without --model is not
// the defaults' gpt-4o-mini (nor priced as it).
func TestScriptedRunIsNotLabelledAsOpenAI(t *testing.T) {
	script := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(script, []byte("steps:\n  - text: hello\n"), 0o600)
	code, out, stderr, msg := status(t, "run", "--script", script, "--store", t.TempDir(), "hi")
	if code != 0 {
		t.Fatalf("exit %d %s\n%s", code, msg, stderr)
	}
	if strings.Contains(stderr, "gpt-4o-mini") || !strings.Contains(stderr, "model scripted") || !strings.Contains(out, "hello") {
		t.Errorf("stderr:\n%s\nstdout:\n%s", stderr, out)
	}
}

// TestQuietPrintsOnlyTheAnswer: --quiet leaves out the text the model says
// before its tool calls.
func TestQuietPrintsOnlyTheAnswer(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "s.yaml")
	os.WriteFile(script, []byte("turns:\n  - text: \"Let me look first.\"\n    tool_calls:\n      - {name: list_dir, args: {path: .}}\n  - text: \"The answer.\"\n"), 0o600)
	code, out, stderr, msg := status(t, "run", "--quiet", "--script", script, "--workspace", dir, "--store", filepath.Join(dir, "store"), "hi")
	if code != 0 {
		t.Fatalf("exit %d %s\n%s", code, msg, stderr)
	}
	if strings.TrimSpace(out) != "The answer." || stderr != "" {
		t.Errorf("stdout %q, stderr %q", out, stderr)
	}
}

// TestJSONOutputs: --json of sessions ls, sessions show, tools and policy
// test is JSON, with durations as strings.
func TestJSONOutputs(t *testing.T) {
	store := t.TempDir()
	if code, _, stderr, msg := status(t, "run", "--config", demoConfig, "--store", store, "What does this project do?"); code != 0 {
		t.Fatalf("run: %d %s\n%s", code, msg, stderr)
	}
	_, out, _, _ := status(t, "sessions", "ls", "--json", "--store", store)
	var list []struct {
		ID    string `json:"id"`
		Turns int    `json:"turns"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 || list[0].Turns == 0 {
		t.Fatalf("sessions ls --json = %s (%v)", out, err)
	}
	_, out, _, _ = status(t, "sessions", "show", list[0].ID, "--json", "--store", store)
	var doc struct {
		Meta     struct{ ID string } `json:"meta"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Meta.ID != list[0].ID || len(doc.Messages) < 2 {
		t.Fatalf("sessions show --json = %s (%v)", out, err)
	}
	if _, out, _, _ = status(t, "sessions", "ls", "--json", "--store", t.TempDir()); strings.TrimSpace(out) != "[]" {
		t.Errorf("empty sessions ls --json = %q", out)
	}

	_, out, _, _ = status(t, "tools", "--json", "--config", demoConfig)
	var tools []map[string]any
	if err := json.Unmarshal([]byte(out), &tools); err != nil || len(tools) == 0 {
		t.Fatalf("tools --json = %s (%v)", out, err)
	}
	for _, tool := range tools {
		if to, ok := tool["timeout"]; ok {
			if _, isString := to.(string); !isString {
				t.Errorf("tool %v timeout is %T, want a duration string", tool["name"], to)
			}
		}
	}
	// Two names print both.
	_, out, _, _ = status(t, "tools", "read_file", "search", "--config", demoConfig)
	if err := json.Unmarshal([]byte(out), &tools); err != nil || len(tools) != 2 {
		t.Errorf("tools read_file search = %s", out)
	}

	code, out, _, _ := status(t, "policy", "test", "--json", "--config", "../../examples/kernel.yaml", "../../examples/policies/coding.yaml")
	var res []struct {
		File   string `json:"file"`
		Passed bool   `json:"passed"`
		Tests  []struct {
			Name   string `json:"name"`
			Passed bool   `json:"passed"`
		} `json:"tests"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || len(res) != 1 || !res[0].Passed || len(res[0].Tests) == 0 {
		t.Fatalf("policy test --json: exit %d %s (%v)", code, out, err)
	}
}

// TestPolicyCheckAgreesWithRun: check and run resolve tools the same way,
// so a policy that names a tool the configuration does not register fails
// both, and passes both with a configuration that registers it.
func TestPolicyCheckAgreesWithRun(t *testing.T) {
	pol := "../../examples/policies/coding.yaml"
	code, _, _, checkMsg := status(t, "policy", "check", pol)
	if code != 1 || !strings.Contains(checkMsg, "run_command") {
		t.Errorf("check with the defaults: exit %d %q", code, checkMsg)
	}
	script := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(script, []byte("steps:\n  - text: hi\n"), 0o600)
	code, _, _, runMsg := status(t, "run", "--policy", pol, "--script", script, "--store", t.TempDir(), "hi")
	if code != 1 || !strings.Contains(runMsg, "run_command") {
		t.Errorf("run with the defaults: exit %d %q", code, runMsg)
	}
	cfg := "../../examples/kernel.yaml"
	if code, out, _, msg := status(t, "policy", "check", "--config", cfg, pol); code != 0 || !strings.Contains(out, "ok") {
		t.Errorf("check --config: exit %d %q %s", code, msg, out)
	}
	if code, _, stderr, msg := status(t, "run", "--config", cfg, "--workspace", t.TempDir(), "--policy", pol, "--script", script, "--store", t.TempDir(), "hi"); code != 0 {
		t.Errorf("run --config: exit %d %q\n%s", code, msg, stderr)
	}
}

// TestMultiProblemErrorKeepsItsLines: a config with two problems prints
// each on its own line, in the file's order, each followed by the line it
// is about and a caret (main's message is errorText).
func TestMultiProblemErrorKeepsItsLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(path, []byte("model:\n  provdier: x\nlimits:\n  max_turns: many\n"), 0o600)
	_, _, _, msg := status(t, "run", "--config", path, "hi")
	want := []string{
		path + ":2:3: model.provdier: unknown field; did you mean `provider`? (see schemas/config.schema.json)",
		"      provdier: x",
		"      ^",
		path + ":4:3: limits.max_turns: expected integer, got string",
		"      max_turns: many",
		"      ^",
	}
	if msg != strings.Join(want, "\n") {
		t.Errorf("message:\n%s\nwant:\n%s", msg, strings.Join(want, "\n"))
	}
}
