package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// The agents tests run examples/agents (docs/agents.md's worked example)
// through the CLI: its configuration, scripts and workspace, copied so a
// run's writes stay in the test's directory.

// agentsExample copies examples/agents into a temporary directory and
// returns its kernel.yaml.
func agentsExample(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agents")
	if err := os.CopyFS(dir, os.DirFS("../../examples/agents")); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "kernel.yaml")
}

// eventLine is one line of --events: an event, or an agent.event nesting
// one of a child's.
type eventLine struct {
	Type       string          `json:"type"`
	SessionID  string          `json:"session_id"`
	CallID     string          `json:"call_id"`
	Tool       string          `json:"tool"`
	Outcome    string          `json:"outcome"`
	Agent      string          `json:"agent"`
	Depth      int             `json:"depth"`
	CostUSD    float64         `json:"cost_usd"`
	StopReason string          `json:"stop_reason"`
	Event      json.RawMessage `json:"event"`
}

func readEventLines(t *testing.T, path string) []eventLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []eventLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e eventLine
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("event line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// nestedEvents unwraps the agent.event lines, recursively: each child
// event with the agent.event that carried it.
func nestedEvents(t *testing.T, lines []eventLine) (outer, inner []eventLine) {
	t.Helper()
	for _, l := range lines {
		if l.Type != (kernel.AgentEvent{}).Type() {
			continue
		}
		var e eventLine
		if err := json.Unmarshal(l.Event, &e); err != nil {
			t.Fatal(err)
		}
		outer = append(outer, l)
		inner = append(inner, e)
	}
	return outer, inner
}

// sessionOf reads session id with kernel sessions show --json.
func sessionOf(t *testing.T, cfg, id string) sessionDoc {
	t.Helper()
	out, errOut, err := cli(t, "sessions", "show", "--config", cfg, "--json", id)
	if err != nil {
		t.Fatalf("sessions show %s: %v\n%s", id, err, errOut)
	}
	var doc sessionDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func runStarted(t *testing.T, lines []eventLine) string {
	t.Helper()
	for _, l := range lines {
		if l.Type == "run.started" {
			return l.SessionID
		}
	}
	t.Fatal("no run.started event")
	return ""
}

func nearUSD(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestAgentsDelegationCLI: kernel run --agent coder on the worked
// example. The coder writes main.go and delegates the review; the
// reviewer's model asks for write_file, which is not on its surface and
// never runs; the reviewer's events arrive nested under the coder's call;
// the coder's session is charged the reviewer's spend.
func TestAgentsDelegationCLI(t *testing.T) {
	cfg := agentsExample(t)
	ws := filepath.Join(filepath.Dir(cfg), "workspace")
	events := filepath.Join(t.TempDir(), "events.jsonl")
	out, errOut, err := cli(t, "run", "--config", cfg, "--agent", "coder", "--events", events, "Add a greeting to main.go")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if !strings.Contains(out, "the reviewer found nothing to fix") {
		t.Fatalf("answer:\n%s\n%s", out, errOut)
	}
	// The human lines show the reviewer's run under the coder's call, its
	// refused write among them; its words never reach stdout.
	for _, want := range []string{"↳ agent reviewer · session", "→ write_file", "↲ agent reviewer completed"} {
		if !strings.Contains(errOut, "    "+want) {
			t.Errorf("stderr lacks the nested %q:\n%s", want, errOut)
		}
	}
	main, err := os.ReadFile(filepath.Join(ws, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(main), `fmt.Println("hello")`) || strings.Contains(string(main), "reviewed") {
		t.Fatalf("main.go after the run (the coder's write only):\n%s", main)
	}
	lines := readEventLines(t, events)
	parentID := runStarted(t, lines)
	outer, inner := nestedEvents(t, lines)
	if len(inner) == 0 {
		t.Fatal("no nested events")
	}
	var agentCall string
	var ownCost float64
	for _, l := range lines {
		if l.Type == "tool.started" && l.Tool == "agent.reviewer" {
			agentCall = l.CallID
		}
		if l.Type == "message.completed" {
			ownCost += l.CostUSD
		}
	}
	var childCost float64
	childID := outer[0].SessionID
	for i, o := range outer {
		if o.CallID != agentCall || o.Agent != "reviewer" || o.Depth != 1 || o.SessionID != childID {
			t.Fatalf("nested event %d: call %q agent %q depth %d session %s; want call %q, reviewer, depth 1", i, o.CallID, o.Agent, o.Depth, o.SessionID, agentCall)
		}
		if inner[i].Type == "message.completed" {
			childCost += inner[i].CostUSD
		}
		if inner[i].Type == "tool.completed" && inner[i].Tool == "write_file" && inner[i].Outcome == "ok" {
			t.Fatal("the reviewer's write_file ran")
		}
	}
	if inner[0].Type != "run.started" || inner[len(inner)-1].Type != "run.completed" {
		t.Fatalf("nested events from %s to %s", inner[0].Type, inner[len(inner)-1].Type)
	}
	if childCost == 0 || ownCost == 0 {
		t.Fatalf("costs: own %v, child %v", ownCost, childCost)
	}
	// The child session: linked to the call, its write refused.
	child := sessionOf(t, cfg, childID)
	if p := child.Meta.Parent; child.Meta.Agent != "reviewer" || p == nil || p.SessionID != parentID || p.CallID != agentCall ||
		p.Depth != 1 || !slices.Equal(p.Chain, []string{"coder", "reviewer"}) {
		t.Fatalf("child meta: agent %q parent %+v", child.Meta.Agent, child.Meta.Parent)
	}
	var refused bool
	for _, m := range child.Messages {
		if m.ToolName == "write_file" {
			refused = m.IsError && strings.Contains(m.Content, "unknown tool")
		}
	}
	if !refused {
		t.Fatalf("the reviewer's write_file was not refused: %+v", child.Messages)
	}
	// Charged upward: the coder's session counts its own generations and
	// the reviewer's.
	parent := sessionOf(t, cfg, parentID)
	if !nearUSD(parent.Meta.CostUSD, ownCost+childCost) || !nearUSD(child.Meta.CostUSD, childCost) {
		t.Fatalf("coder session $%.6f, want own $%.6f + reviewer $%.6f; reviewer session $%.6f", parent.Meta.CostUSD, ownCost, childCost, child.Meta.CostUSD)
	}
	var answer *kernel.Message
	for i := range parent.Messages {
		if parent.Messages[i].ToolName == "agent.reviewer" {
			answer = &parent.Messages[i]
		}
	}
	if answer == nil || answer.Child == nil || answer.Child.SessionID != childID || !strings.HasPrefix(answer.Content, "LGTM") {
		t.Fatalf("the coder's call was answered %+v", answer)
	}
	// A child session runs only through its parent.
	if _, errOut, err := cli(t, "run", "--config", cfg, "--session", childID, "more"); err == nil || !strings.Contains(err.Error()+errOut, "child session") {
		t.Fatalf("running the child directly: %v\n%s", err, errOut)
	}
}

// TestAgentsBudgetRefusesChildCLI: a coder whose budget has less left
// than the reviewer's first model call would cost cannot start the
// reviewer: the call is answered with the budget refusal, and no child
// session exists.
func TestAgentsBudgetRefusesChildCLI(t *testing.T) {
	cfg := agentsExample(t)
	dir := filepath.Dir(cfg)
	// The coder has $0.05; its first turn spends about $0.002. The
	// reviewer's model is priced so its first call (its system prompt,
	// task and tools: a few hundred input tokens) would cost more than
	// $0.1.
	if err := os.WriteFile(filepath.Join(dir, "scripts", "coder-poor.yaml"), []byte(`turns:
  - tool_calls:
      - name: agent.reviewer
        args: {task: "Review main.go."}
  - match: {role: tool, contains: "not enough budget left"}
    text: "The reviewer could not be afforded."
`), 0o600); err != nil {
		t.Fatal(err)
	}
	over := filepath.Join(dir, "poor.yaml")
	if err := os.WriteFile(over, []byte("model:\n  script: scripts/coder-poor.yaml\n  prices:\n    small-model: {input_per_mtok: 1000, output_per_mtok: 1000}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	events := filepath.Join(t.TempDir(), "events.jsonl")
	out, errOut, err := cli(t, "run", "--config", cfg, "--config", over, "--agent", "coder", "--events", events, "review main.go")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if !strings.Contains(out, "could not be afforded") {
		t.Fatalf("answer %q\n%s", out, errOut)
	}
	lines := readEventLines(t, events)
	if outer, _ := nestedEvents(t, lines); len(outer) != 0 {
		t.Fatalf("the reviewer ran: %d nested events", len(outer))
	}
	parent := sessionOf(t, cfg, runStarted(t, lines))
	var answer *kernel.Message
	for i := range parent.Messages {
		if parent.Messages[i].ToolName == "agent.reviewer" {
			answer = &parent.Messages[i]
		}
	}
	if answer == nil || !answer.IsError || !strings.Contains(answer.Content, "agent reviewer was not started") || answer.Child != nil {
		t.Fatalf("the call was answered %+v", answer)
	}
	if parent.Meta.CostUSD > 0.05 {
		t.Fatalf("the coder spent $%.4f of $0.05", parent.Meta.CostUSD)
	}
	childID := kernel.ChildSessionID(parent.Meta.ID, answer.Seq-1, answer.ToolCallID)
	if _, _, err := cli(t, "sessions", "show", "--config", cfg, "--json", childID); err == nil {
		t.Fatalf("the refused child's session %s exists", childID)
	}
}

// TestAgentsBadConfig: what would fail at run time is refused at load,
// naming the file, the line and the fix.
func TestAgentsBadConfig(t *testing.T) {
	const model = "model: {provider: scripted, name: m, script: s.yaml}\n"
	const base = "tools:\n  builtin:\n    enable: [read_file, write_file]\n"
	cases := map[string]struct{ yaml, want string }{
		"unknown tool": {`agents:
  a:
    description: x
    tools: [read_fiel]
`, `bad.yaml:8:13: agent "a": tools[0]: unknown tool "read_fiel" (did you mean "read_file"?)`},
		"unknown agent": {`agents:
  a:
    description: x
    tools: [agent.b]
`, `bad.yaml:8:13: agent "a": tools[0]: unknown agent "b"`},
		"cycle": {`agents:
  a:
    description: x
    tools: [agent.b]
  b:
    description: y
    tools: [agent.a]
`, "agents call each other in a cycle: a → b → a; remove agent.a from b's tools"},
		"self": {`agents:
  a:
    description: x
    tools: [agent.a]
`, "agent a calls itself"},
		"wider surface": {`agents:
  a:
    description: x
    tools: [read_file, agent.b]
  b:
    description: y
    tools: [read_file, write_file]
`, "bad.yaml:11:24: agent \"b\": tools[1]: agent b may call write_file, which its caller a may not"},
		"widen without policy": {`agents:
  a:
    description: x
    tools: [read_file]
    widen: true
`, "bad.yaml:9:12: agent \"a\": widen: an agent given tools its callers do not have needs a policy of its own"},
		"unknown model": {`model: {provider: openai, name: gpt-4o}
agents:
  a:
    description: x
    tools: [read_file]
    model: gpt-9000-turbo
`, `bad.yaml:9:12: agent "a": model: unknown model "gpt-9000-turbo"`},
		"missing output": {`agents:
  a:
    description: x
    tools: [read_file]
pipelines:
  p:
    steps:
      - name: one
        agent: a
        input: "{{steps.two.output}}"
      - name: two
        agent: a
        input: "{{input}}"
`, "bad.yaml:14:16: pipeline \"p\": steps[0].input: reads {{steps.two.output}}, but that step runs later"},
		"parallel sibling": {`agents:
  a:
    description: x
    tools: [read_file]
pipelines:
  p:
    steps:
      - parallel:
          - {name: one, agent: a, input: "{{input}}"}
          - {name: two, agent: a, input: "{{steps.one.output}}"}
`, "reads {{steps.one.output}}, but it runs at the same time, in the same parallel group"},
		"pipeline unknown agent": {`agents:
  a:
    description: x
    tools: [read_file]
pipelines:
  p:
    steps:
      - {name: one, agent: b, input: "{{input}}"}
`, `pipeline "p": steps[0].agent: unknown agent "b"`},
		"bad template": {`agents:
  a:
    description: x
    tools: [read_file]
pipelines:
  p:
    steps:
      - {name: one, agent: a, input: "{{ env.HOME }}"}
`, "{{env.HOME}} is not a reference: write {{input}}"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "s.yaml"), []byte("turns:\n  - text: hi\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "bad.yaml")
			doc := model + base + tc.yaml
			if strings.HasPrefix(tc.yaml, "model:") {
				doc = base + tc.yaml
			}
			if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"run", "--config", path, "hi"}, {"agents", "ls", "--config", path}} {
				_, errOut, err := cli(t, args...)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("kernel %s: %v, want %q\n%s", args[0], err, tc.want, errOut)
				}
			}
		})
	}
}

// TestAgentsPipelineCLI: kernel run --pipeline review: a step, two steps
// in parallel, and a step that joins them, each a child session of the
// pipeline's; the writer's script only answers when both reviews reached
// its input.
func TestAgentsPipelineCLI(t *testing.T) {
	cfg := agentsExample(t)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	out, errOut, err := cli(t, "run", "--config", cfg, "--pipeline", "review", "--events", events, "main.go")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if strings.TrimSpace(out) != "Report: both reviews found main.go fine." {
		t.Fatalf("answer %q\n%s", out, errOut)
	}
	lines := readEventLines(t, events)
	pid := runStarted(t, lines)
	p := sessionOf(t, cfg, pid)
	if p.Meta.Agent != "pipeline:review" {
		t.Fatalf("pipeline session agent %q", p.Meta.Agent)
	}
	// The steps' calls, by round: plan; correctness and style together;
	// report.
	var rounds [][]string
	var childCost float64
	children := map[string]string{}
	for _, m := range p.Messages {
		if m.Role == kernel.RoleAssistant && len(m.ToolCalls) > 0 {
			var r []string
			for _, c := range m.ToolCalls {
				r = append(r, c.ID)
			}
			rounds = append(rounds, r)
		}
		if m.Child != nil {
			children[m.ToolCallID] = m.Child.SessionID
			childCost += m.Child.CostUSD
		}
	}
	want := [][]string{{"step_plan"}, {"step_correctness", "step_style"}, {"step_report"}}
	if len(rounds) != len(want) {
		t.Fatalf("rounds %v, want %v", rounds, want)
	}
	for i := range want {
		if !slices.Equal(rounds[i], want[i]) {
			t.Fatalf("rounds %v, want %v", rounds, want)
		}
	}
	for call, id := range children {
		c := sessionOf(t, cfg, id)
		if c.Meta.Parent == nil || c.Meta.Parent.SessionID != pid || c.Meta.Parent.CallID != call || c.Meta.Parent.Depth != 1 {
			t.Fatalf("step %s's session %s: parent %+v", call, id, c.Meta.Parent)
		}
	}
	if len(children) != 4 {
		t.Fatalf("child sessions %v", children)
	}
	if childCost == 0 || !nearUSD(p.Meta.CostUSD, childCost) {
		t.Fatalf("pipeline session $%.6f, its steps $%.6f", p.Meta.CostUSD, childCost)
	}
}

// TestAgentsListShow: kernel agents ls and show describe the example.
func TestAgentsListShow(t *testing.T) {
	cfg := agentsExample(t)
	out, errOut, err := cli(t, "agents", "ls", "--config", cfg, "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var doc agentsDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Agents) != 4 || doc.Agents[1].Name != "reviewer" || doc.Agents[1].Model != "small-model" ||
		!slices.Equal(doc.Agents[1].CalledBy, []string{"coder", "pipeline:review"}) || len(doc.Pipelines) != 1 || len(doc.Pipelines[0].Steps[1]) != 2 {
		t.Fatalf("agents ls --json: %s", out)
	}
	out, errOut, err = cli(t, "agents", "show", "--config", cfg, "reviewer")
	if err != nil || !strings.Contains(out, "called by:  coder, pipeline:review") || !strings.Contains(out, "You review Go code.") {
		t.Fatalf("agents show reviewer: %v\n%s\n%s", err, out, errOut)
	}
	if _, _, err := cli(t, "run", "--config", cfg, "--agent", "nobody", "hi"); err == nil || !strings.Contains(err.Error(), "the agents are: coder, reviewer, planner, writer") {
		t.Fatalf("--agent nobody: %v", err)
	}
}

// TestAgentsKillDuringChild: the kernel is killed (SIGKILL) while the
// reviewer's command runs; continuing the coder's session resumes the
// reviewer's: its interrupted call is answered as interrupted, not run
// again, the reviewer answers, and the coder's call gets that answer.
func TestAgentsKillDuringChild(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o700); err != nil {
		t.Fatal(err)
	}
	write("coder.yaml", `turns:
  - tool_calls:
      - name: agent.tester
        args: {task: "Run the tests."}
  - match: {role: user, contains: "go on"}
    text: "The tester was interrupted and said so."
`)
	// The tester's command appends to a file each time it starts: a second
	// start would show.
	write("tester.yaml", `turns:
  - tool_calls:
      - name: run_command
        args: {argv: [sh, -c, "echo started >> starts; sleep 60"]}
  - match: {role: tool, contains: "interrupted"}
    text: "The tests were interrupted; I did not run them again."
`)
	cfg := write("kernel.yaml", `model: {provider: scripted, name: m, script: coder.yaml}
workspace: ws
store: {dir: store}
tools:
  builtin:
    enable: [run_command]
agents:
  coder:
    description: Codes.
    tools: [run_command, agent.tester]
  tester:
    description: Runs the tests.
    model: {script: tester.yaml}
    tools: [run_command]
`)
	events := filepath.Join(dir, "events.jsonl")
	cmd := exec.Command(os.Args[0], "run", "--config", cfg, "--agent", "coder", "--events", events, "test it")
	cmd.Env = append(os.Environ(), "KERNEL_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	starts := filepath.Join(dir, "ws", "starts")
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_ = cmd.Wait()
	}()
	// A bound on a hang, not a speed claim: a sandboxed start under -race
	// on a loaded 2-core machine took longer than a minute.
	deadline := time.After(3 * time.Minute)
	for started := false; !started; {
		select {
		case <-exited:
			// The run ended without starting the command: its events say
			// why (a tool's error is there, not on stderr).
			ev, _ := os.ReadFile(events)
			t.Fatalf("the run ended before the tester's command started:\n%s\nevents:\n%s", stderr.String(), ev)
		case <-deadline:
			cmd.Process.Kill()
			<-exited
			t.Fatalf("the tester's command never started:\n%s", stderr.String())
		case <-time.After(20 * time.Millisecond):
			b, _ := os.ReadFile(starts)
			started = len(b) > 0
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no cleanup runs
		t.Fatal(err)
	}
	<-exited
	lines := readEventLines(t, events)
	parentID := runStarted(t, lines)
	outer, _ := nestedEvents(t, lines)
	if len(outer) == 0 {
		t.Fatal("no nested events before the kill")
	}
	childID := outer[0].SessionID
	if s := sessionOf(t, cfg, childID); s.Meta.Status != kernel.StatusRunning {
		t.Fatalf("the child was left %s, want running (as a kill leaves it)", s.Meta.Status)
	}
	// Resume: the session's agent (coder) is found from the session.
	out, errOut, err := cli(t, "run", "--config", cfg, "--session", parentID, "--accept-changed", "go on")
	if err != nil || !strings.Contains(out, "The tester was interrupted and said so.") {
		t.Fatalf("resume: %v\n%s", err, errOut)
	}
	if b, _ := os.ReadFile(starts); string(b) != "started\n" {
		t.Fatalf("the tester's command started %d times", strings.Count(string(b), "started"))
	}
	child := sessionOf(t, cfg, childID)
	var interrupted, answered bool
	for _, m := range child.Messages {
		if m.ToolName == "run_command" {
			interrupted = m.IsError && strings.Contains(m.Content, "interrupted")
		}
		answered = answered || strings.HasPrefix(m.Content, "The tests were interrupted")
	}
	if !interrupted || !answered || child.Meta.Status == kernel.StatusRunning {
		t.Fatalf("the child after the resume: %s %+v", child.Meta.Status, child.Messages)
	}
	parent := sessionOf(t, cfg, parentID)
	var answer *kernel.Message
	for i := range parent.Messages {
		if parent.Messages[i].ToolName == "agent.tester" {
			answer = &parent.Messages[i]
		}
	}
	if answer == nil || answer.Child == nil || !answer.Child.Resumed || !strings.HasPrefix(answer.Content, "The tests were interrupted") {
		t.Fatalf("the coder's call was answered %+v", answer)
	}
}

// TestCompletionOfAgentNames: kernel agents ls --names lists the names, and
// bash completion of --agent and --pipeline offers them (asking kernel
// itself, in the directory of the configuration).
func TestCompletionOfAgentNames(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	cfg := agentsExample(t)
	out, errOut, err := cli(t, "agents", "ls", "--config", cfg, "--names", "agents")
	if err != nil || out != "coder\nreviewer\nplanner\nwriter\n" {
		t.Fatalf("agents ls --names agents: %q %v %s", out, err, errOut)
	}
	if _, _, err := cli(t, "agents", "ls", "--config", cfg, "--names", "tools"); err == nil {
		t.Fatal("--names tools was accepted")
	}
	script, _, err := cli(t, "completion", "bash")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(bin, "kernel")); err != nil {
		t.Fatal(err)
	}
	compFile := filepath.Join(t.TempDir(), "kernel.bash")
	if err := os.WriteFile(compFile, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) string {
		t.Helper()
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		sh := fmt.Sprintf(`source %s; COMP_WORDS=(%s); COMP_CWORD=%d; _kernel; echo "${COMPREPLY[*]}"`, compFile, strings.Join(quoted, " "), len(words)-1)
		cmd := exec.Command("bash", "-c", sh)
		cmd.Dir = filepath.Dir(cfg)
		cmd.Env = append(os.Environ(), "KERNEL_TEST_MAIN=1", "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, b)
		}
		return strings.TrimSpace(string(b))
	}
	if got := complete("kernel", "run", "--agent", ""); got != "coder reviewer planner writer" {
		t.Fatalf("kernel run --agent <TAB>: %q", got)
	}
	if got := complete("kernel", "run", "--agent", "re"); got != "reviewer" {
		t.Fatalf("kernel run --agent re<TAB>: %q", got)
	}
	if got := complete("kernel", "run", "--pipeline", ""); got != "review" {
		t.Fatalf("kernel run --pipeline <TAB>: %q", got)
	}
}

// TestAgentsHotReloadDeclared: a hot reload of declared tools reaches a
// named agent's registry: the tool it names answers as changed, a tool it
// does not name is not added to it, and a tool the source dropped is
// dropped from it.
func TestAgentsHotReloadDeclared(t *testing.T) {
	cfg := declaredSetup(t, "steps: [{text: hi}]\n", `  inline:
    - {name: freeze, description: Deploy freeze., text: "frozen"}
    - {name: oncall, description: Who is on call., text: "ana"}
agents:
  checker:
    description: Checks the freeze.
    tools: [freeze]
`, nil)
	c, err := loadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(t.Context(), c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	prov, err := a.provider()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.openStore(false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.kernel(prov, nil); err != nil {
		t.Fatal(err)
	}
	reg := a.agents.kernels["checker"].Tools()
	wait := watchReloads(t, a)
	rewrite := func(body string) {
		t.Helper()
		b, _ := os.ReadFile(cfg)
		s := string(b)
		s = s[:strings.Index(s, "  inline:")] + body + s[strings.Index(s, "agents:"):]
		tmp := cfg + ".tmp"
		os.WriteFile(tmp, []byte(s), 0o600)
		if err := os.Rename(tmp, cfg); err != nil {
			t.Fatal(err)
		}
		for {
			if r := wait(); r.What == "tools" {
				if r.Error != "" {
					t.Fatalf("reload: %+v", r)
				}
				return
			}
		}
	}
	rewrite("  inline:\n    - {name: freeze, description: Deploy freeze., text: \"thawed\"}\n    - {name: oncall, description: Who is on call., text: \"ben\"}\n    - {name: extra, description: More., text: \"x\"}\n")
	fz, ok := reg.Lookup("freeze")
	if !ok {
		t.Fatal("the checker lost freeze")
	}
	if res, _ := fz.Call(t.Context(), nil); res.Content != "thawed" {
		t.Fatalf("the checker's freeze answers %q after the reload", res.Content)
	}
	if _, ok := reg.Lookup("oncall"); ok {
		t.Fatal("the reload gave the checker a tool it does not name")
	}
	if _, ok := reg.Lookup("extra"); ok {
		t.Fatal("the reload gave the checker a new tool it does not name")
	}
	rewrite("  inline:\n    - {name: oncall, description: Who is on call., text: \"ben\"}\n")
	if _, ok := reg.Lookup("freeze"); ok {
		t.Fatal("a tool the source dropped is still on the checker's surface")
	}
}
