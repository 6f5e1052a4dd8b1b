package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/schema"
	"github.com/agentkernel/agentkernel/policy"
)

// The corpus: three sessions recorded with a scripted model under
// diffOld, then re-decided under diffNew, which denies echo (no-echo),
// asks instead of denying rm (no-rm), asks for read_file after a
// list_dir in the same run (read-after-list, which reads run state),
// drops search from the reads surface, and adds a rule no call matches
// (no-sudo).
const diffOld = `name: corpus
revision: "1"
defaults: {tool_call: allow}
surfaces:
  sets:
    all: ["*"]
    reads: [read_file, list_dir, search]
  default: all
  select:
    - id: question
      when: not (run.prompt matches "(?i)\\bfix\\b")
      surface: reads
rules:
  - id: no-rm
    effect: deny
    tools: [run_command]
    when: call.command matches "^rm( |$)"
    message: '"no rm: " + call.command'
tests:
  - name: questions only read
    input: {run: {prompt: "what is here?"}}
    expect: {surface: reads, not_offered: [run_command]}
  - name: rm is refused
    input: {run: {prompt: fix it}, call: {tool: run_command, args: {argv: [rm, -rf, build]}}}
    expect: {decision: deny, rules: [no-rm]}
`

const diffNew = `name: corpus
revision: "2"
defaults: {tool_call: allow}
surfaces:
  sets:
    all: ["*"]
    reads: [read_file, list_dir]
  default: all
  select:
    - id: question
      when: not (run.prompt matches "(?i)\\bfix\\b")
      surface: reads
rules:
  - id: no-rm
    effect: ask
    tools: [run_command]
    when: call.command matches "^rm( |$)"
  - id: no-echo
    effect: deny
    tools: [run_command]
    when: call.command startsWith "echo"
  - id: no-sudo
    effect: deny
    when: call.command startsWith "sudo "
  - id: read-after-list
    effect: ask
    tools: [read_file]
    when: '"list_dir" in run.tools'
tests:
  - name: questions only read
    input: {run: {prompt: "what is here?"}}
    expect: {surface: reads, not_offered: [run_command, search]}
  - name: rm asks
    input: {run: {prompt: fix it}, call: {tool: run_command, args: {argv: [rm, -rf, build]}}}
    expect: {decision: ask, rules: [no-rm]}
  - name: echo is refused
    input: {call: {tool: run_command, args: {argv: [echo, hi]}}}
    expect: {decision: deny, rules: [no-echo]}
  - name: sudo is refused
    input: {call: {tool: run_command, args: {argv: [sudo, ls]}}}
    expect: {decision: deny, rules: [no-sudo]}
  - name: reading after a listing asks
    input: {run: {calls: [{tool: list_dir}]}, call: {tool: read_file, args: {path: a.txt}}}
    expect: {decision: ask, rules: [read-after-list]}
`

// The secret an argument carries: the report shows it scrubbed.
const diffSecret = "ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5"

var diffScripts = []struct{ prompt, script string }{
	{"fix the build", `steps:
  - tool_calls:
      - {name: run_command, args: {argv: [echo, hi]}}
      - {name: run_command, args: {argv: [rm, -rf, build]}}
  - match: {role: tool}
    text: done
`},
	{"what is here?", `steps:
  - tool_calls: [{name: list_dir, args: {path: "."}}]
  - match: {role: tool}
    tool_calls: [{name: read_file, args: {path: a.txt}}]
  - match: {role: tool}
    text: an a.txt
`},
	{"fix the docs", `steps:
  - tool_calls:
      - {name: write_file, args: {path: NOTES.md, content: "notes\n"}}
      - {name: run_command, args: {argv: [echo, ` + diffSecret + `]}}
  - match: {role: tool}
    text: written
`},
}

// diffCorpus records the sessions under diffOld and returns the config,
// the two policy files, the store and the session ids in order.
func diffCorpus(t *testing.T) (conf, oldFile, newFile, store string, ids []string) {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"old.yaml": diffOld, "new.yaml": diffNew, "ws/a.txt": "a\n",
		"kernel.yaml": "workspace: ws\ntools:\n  builtin:\n    enable: [read_file, list_dir, search, write_file, edit_file, run_command]\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conf, oldFile, newFile, store = filepath.Join(dir, "kernel.yaml"), filepath.Join(dir, "old.yaml"), filepath.Join(dir, "new.yaml"), filepath.Join(dir, "store")
	for i, s := range diffScripts {
		script := filepath.Join(dir, "script"+string(rune('1'+i))+".yaml")
		if err := os.WriteFile(script, []byte(s.script), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, err := cli(t, "run", "--config", conf, "--policy", oldFile, "--script", script, "--store", store, s.prompt)
		if err != nil {
			t.Fatalf("record session %d: %v\n%s", i+1, err, errOut)
		}
		ids = append(ids, sessionLine.FindStringSubmatch(errOut)[1])
	}
	return conf, oldFile, newFile, store, ids
}

type diffChangeKey struct {
	session, tool, from, to, rules string
	turn                           int
}

// TestPolicyDiffCorpus: the diff of the recorded corpus lists exactly the
// changed decisions, with the rules before and after, re-decided with the
// run state of each call (read-after-list); the JSON validates against
// schemas/policy-diff.schema.json; the exit status is 1 while a change
// between allow and deny/ask is not expected, 0 once --expect names them;
// --session, --since and --exports select the sessions; and coverage names
// the rule no call matched and the tools only the default decided.
func TestPolicyDiffCorpus(t *testing.T) {
	conf, oldFile, newFile, store, ids := diffCorpus(t)
	base := []string{"policy", "diff", "--config", conf, "--store", store}

	out, errOut, err := cli(t, append(base, "--json", oldFile, newFile)...)
	if code, _ := exitStatus(err); code != 1 {
		t.Fatalf("exit %d, want 1 (unexpected changes): %v\n%s", code, err, errOut)
	}
	if !strings.Contains(err.Error(), "3 decisions change between allow and deny/ask without an --expect that matches them (e.g. --expect allow:deny@no-echo)") {
		t.Fatalf("error: %v", err)
	}
	s, err := schema.Embedded("policy-diff.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ValidateJSON([]byte(out)); err != nil {
		t.Fatalf("the report does not match schemas/policy-diff.schema.json: %v\n%s", err, out)
	}
	var rep policy.DiffReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var got []diffChangeKey
	for _, c := range rep.Changes {
		rules := strings.Join(c.Old.Rules, ",") + ">" + strings.Join(c.New.Rules, ",")
		got = append(got, diffChangeKey{c.Session, c.Tool, string(c.Old.Effect), string(c.New.Effect), rules, c.Turn})
	}
	want := []diffChangeKey{
		{ids[0], "run_command", "allow", "deny", ">no-echo", 1},
		{ids[0], "run_command", "deny", "ask", "no-rm>no-rm", 1},
		{ids[1], "read_file", "allow", "ask", ">read-after-list", 2},
		{ids[2], "run_command", "allow", "deny", ">no-echo", 1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("changes:\n got %v\nwant %v", got, want)
	}
	if rep.Sessions != 3 || rep.Calls != 6 || rep.Changed != 4 || rep.Unchanged != 2 || rep.Gating != 3 || rep.Unexpected != 3 || rep.Surfaces != 7 {
		t.Fatalf("summary: %+v", rep)
	}
	// Session 2's three generations lose search from the reads surface.
	if len(rep.SurfaceChanges) != 3 || rep.SurfaceChanges[0].Session != ids[1] || !slices.Equal(rep.SurfaceChanges[0].Removed, []string{"search"}) {
		t.Fatalf("surface changes: %+v", rep.SurfaceChanges)
	}
	if strings.Contains(out, diffSecret) || !strings.Contains(out, "[REDACTED]") {
		t.Fatal("the report shows the argument's secret")
	}
	cov := rep.Coverage.New
	if len(cov.DeadRules) != 1 || cov.DeadRules[0].ID != "no-sudo" {
		t.Fatalf("dead rules of new: %+v", cov.DeadRules)
	}
	if !slices.Equal(toolNames(cov.DefaultOnly), []string{"list_dir", "write_file"}) {
		t.Fatalf("default-only tools of new: %+v", cov.DefaultOnly)
	}
	if !slices.Equal(toolNames(rep.Coverage.Old.DefaultOnly), []string{"list_dir", "read_file", "write_file"}) || len(rep.Coverage.Old.DeadRules) != 0 {
		t.Fatalf("coverage of old: %+v", rep.Coverage.Old)
	}

	// The text report, with the gating changes expected: exit 0.
	out, errOut, err = cli(t, append(base, "--expect", "allow:deny@no-echo", "--expect", "allow:ask@read-after-list", oldFile, newFile)...)
	if err != nil {
		t.Fatalf("with --expect: %v\n%s\n%s", err, out, errOut)
	}
	for _, w := range []string{"3 sessions: 6 calls re-decided, 2 unchanged, 4 changed (3 between allow and deny/ask, 0 unexpected)",
		"allow  -> deny   2", "no-echo (new) 2", "old: allow (default): no rule matched; the default is allow",
		"new: deny by no-echo", "(expected)", "no longer offers search", "1 rules matched no call: no-sudo",
		"tools only the default decided: list_dir (1 calls) write_file (1 calls)"} {
		if !strings.Contains(out, w) {
			t.Errorf("report lacks %q:\n%s", w, out)
		}
	}
	// One expectation too few: exit 1 again.
	if _, _, err := cli(t, append(base, "--expect", "allow:deny@no-echo", oldFile, newFile)...); !strings.Contains(errString(err), "1 decisions change") {
		t.Fatalf("one expectation: %v", err)
	}
	// --session: only that session's changes.
	out, _, _ = cli(t, append(base, "--json", "--session", ids[1], oldFile, newFile)...)
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Sessions != 1 || rep.Changed != 1 {
		t.Fatalf("--session: %v %+v", err, rep)
	}
	// --since a date after the corpus: nothing to compare.
	out, _, err = cli(t, append(base, "--json", "--since", "2999-01-01", oldFile, newFile)...)
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.Sessions != 0 {
		t.Fatalf("--since: %v %+v", err, rep)
	}
	// --exports: the same sessions exported to a directory.
	exports := t.TempDir()
	for i, id := range ids {
		if _, errOut, err := cli(t, "sessions", "export", "--store", store, "-o", filepath.Join(exports, "s"+string(rune('1'+i))+".jsonl"), id); err != nil {
			t.Fatalf("export: %v\n%s", err, errOut)
		}
	}
	out, _, _ = cli(t, "policy", "diff", "--config", conf, "--json", "--exports", exports, oldFile, newFile)
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Sessions != 3 || rep.Changed != 4 {
		t.Fatalf("--exports: %v %+v", err, rep)
	}
	// coverage alone.
	out, _, err = cli(t, "policy", "coverage", "--config", conf, "--store", store, newFile)
	if err != nil || !strings.Contains(out, "1 rules matched no call: no-sudo") {
		t.Fatalf("coverage: %v\n%s", err, out)
	}
}

func toolNames(ts []policy.ToolCalls) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Tool)
	}
	return out
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
