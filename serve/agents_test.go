package serve_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/agents"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/scripted"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
	"github.com/agentkernel/agentkernel/serve"
)

// reviewerScript asks for a write the reviewer's surface does not have,
// then answers.
const reviewerScript = `
steps:
  - text: "Trying to write."
    tool_calls:
      - name: write_file
        args: {path: notes.txt, content: "overwritten\n"}
  - text: "Reviewed: looks fine."
`

// TestNamedAgentsServe: GET /v1/agents lists the named agent with its
// surface; a session created for it runs through its kernel (its model's
// write_file is answered "unknown tool": the top-level kernel would have
// asked for an approval, and the file is unchanged); a key restricted to
// agent:reviewer cannot create a session of the top-level agent, and
// sees only the agents it may run. On Badger and on PostgreSQL.
func TestNamedAgentsServe(t *testing.T) {
	t.Run("badger", func(t *testing.T) {
		testNamedAgents(t, rigOpts{badger: filepath.Join(t.TempDir(), "db")})
	})
	t.Run("postgres", func(t *testing.T) {
		testNamedAgents(t, rigOpts{pg: pgtest.Shared(t).Migrated(t), replica: "replica-a", keys: filepath.Join(t.TempDir(), "keys.json")})
	})
}

func testNamedAgents(t *testing.T, o rigOpts) {
	o.reviewer = reviewerScript
	r := newRig(t, o)
	list := r.must(200, "GET", "/v1/agents", r.reader, nil)["agents"].([]any)
	if len(list) != 1 {
		t.Fatalf("agents: %v", list)
	}
	a := list[0].(map[string]any)
	if a["name"] != "reviewer" || a["kind"] != "agent" || len(a["tools"].([]any)) != 1 || a["tools"].([]any)[0] != "read_file" {
		t.Fatalf("agent: %v", a)
	}
	r.must(404, "GET", "/v1/agents/nope", r.reader, nil)
	r.must(200, "GET", "/v1/agents/reviewer", r.reader, nil)
	r.must(400, "POST", "/v1/sessions", r.alice, map[string]any{"agent": "nope"})

	restricted := r.key("ci", "", "run", "read", "agent:reviewer")
	if p := r.do("POST", "/v1/sessions", restricted, map[string]any{"title": "top"}); p.status != 403 {
		t.Fatalf("a key restricted to reviewer created a top-level session: %d %s", p.status, p.body)
	}
	sid := r.must(201, "POST", "/v1/sessions", restricted, map[string]any{"title": "review", "agent": "reviewer"})["id"].(string)
	r.must(202, "POST", "/v1/sessions/"+sid+"/runs", restricted, map[string]any{"prompt": "review notes.txt"})
	s := r.waitStatus(restricted, sid, "idle")
	if s["agent"] != "reviewer" {
		t.Fatalf("session: %v", s)
	}
	runs := r.must(200, "GET", "/v1/sessions/"+sid+"/runs", restricted, nil)["runs"].([]any)
	run := runs[len(runs)-1].(map[string]any)
	if run["status"] != "completed" || run["output"] != "Reviewed: looks fine." {
		t.Fatalf("run: %v", run)
	}
	b, err := os.ReadFile(filepath.Join(r.ws, "notes.txt"))
	if err != nil || string(b) != "hello\n" {
		t.Fatalf("notes.txt: %q %v (the reviewer wrote)", b, err)
	}
	// One request: a new session of the agent and its run.
	run = r.must(202, "POST", "/v1/agents/reviewer/runs", restricted, map[string]any{"prompt": "again"})["run"].(map[string]any)
	sid2 := run["session_id"].(string)
	if s := r.waitStatus(restricted, sid2, "idle"); s["agent"] != "reviewer" {
		t.Fatalf("session: %v", s)
	}
	r.must(404, "POST", "/v1/agents/nope/runs", restricted, map[string]any{"prompt": "x"})
	r.must(404, "POST", "/v1/pipelines/nope/runs", restricted, map[string]any{"prompt": "x"})
	// A key restricted to another agent does not see this one.
	other := r.key("other", "", "read", "agent:writer")
	if n := len(r.must(200, "GET", "/v1/agents", other, nil)["agents"].([]any)); n != 0 {
		t.Fatalf("a key restricted to writer sees %d agents", n)
	}
	r.must(404, "GET", "/v1/agents/reviewer", other, nil)
	r.must(404, "POST", "/v1/agents/reviewer/runs", r.key("other-run", "", "run", "agent:writer"), map[string]any{"prompt": "x"})
}

// TestNamedAgentApprovalInbox: a named agent's call waiting for a person
// is shown in the inbox (GET /v1/approvals) and on its session with the
// agent that asks.
func TestNamedAgentApprovalInbox(t *testing.T) {
	r := newRig(t, rigOpts{badger: filepath.Join(t.TempDir(), "db"), reviewer: reviewerScript, reviewerTools: []string{"write_file"}})
	sid := r.must(201, "POST", "/v1/sessions", r.alice, map[string]any{"agent": "reviewer"})["id"].(string)
	r.must(202, "POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "review"})
	s := r.waitStatus(r.alice, sid, "awaiting_approval")
	if p := s["pending_approval"].(map[string]any); p["agent"] != "reviewer" || p["tool"] != "write_file" {
		t.Fatalf("pending approval: %v", p)
	}
	inbox := r.must(200, "GET", "/v1/approvals", r.alice, nil)["approvals"].([]any)
	if len(inbox) != 1 || inbox[0].(map[string]any)["agent"] != "reviewer" {
		t.Fatalf("inbox: %v", inbox)
	}
	// A top-level session's approval names no agent.
	top := r.newSession(r.alice)
	r.must(202, "POST", "/v1/sessions/"+top+"/runs", r.alice, map[string]any{"prompt": "go"})
	if p := r.waitStatus(r.alice, top, "awaiting_approval")["pending_approval"].(map[string]any); p["agent"] != nil {
		t.Fatalf("top-level approval names agent %v", p["agent"])
	}
}

// rigPipeline builds the pipeline "review" of the rig (rigOpts.pipeline):
// plan → (correctness ∥ style) → report, each step an agent with a
// scripted model and read_file alone, on base's store, policy and inbox.
// The report agent's script answers only when both reviews reached its
// input, so a join that lost one fails the run.
func rigPipeline(t testing.TB, base kernel.Config, tools []kernel.Tool) serve.Agent {
	t.Helper()
	scripts := map[string]string{
		"plan":        "steps:\n  - match: {contains: \"review notes.txt\"}\n    text: \"PLAN: check notes.txt\"\n",
		"correctness": "steps:\n  - match: {contains: \"PLAN: check notes.txt\"}\n    text: \"CORRECT: no bugs\"\n",
		"style":       "steps:\n  - match: {contains: \"PLAN: check notes.txt\"}\n    text: \"STYLE: tidy\"\n",
		"report":      "steps:\n  - match: {regex: \"(?s)CORRECT: no bugs.*STYLE: tidy\"}\n    text: \"REPORT: notes.txt is fine\"\n",
	}
	reg := kernel.NewRegistry()
	for _, name := range []string{"plan", "correctness", "style", "report"} {
		areg := kernel.NewRegistry()
		for _, tl := range tools {
			if tl.Spec().Name == "read_file" {
				if err := areg.Register(tl); err != nil {
					t.Fatal(err)
				}
			}
		}
		sc, err := scripted.Parse(name+".yaml", []byte(scripts[name]))
		if err != nil {
			t.Fatal(err)
		}
		kc := base
		kc.Provider, kc.Tools, kc.Agent = scripted.New(sc), areg, name
		ak, err := kernel.New(kc)
		if err != nil {
			t.Fatal(err)
		}
		at, err := kernel.AgentTool(kernel.Agent{Name: name, Description: "The " + name + " step.", Kernel: ak, Tier: kernel.TierReadOnly})
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Register(at); err != nil {
			t.Fatal(err)
		}
	}
	tmpl := func(s string) *agents.Template {
		tp, err := agents.ParseTemplate(s)
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	p := &agents.Pipeline{Name: "review", Description: "Plan, review twice, report.", Stages: [][]agents.Step{
		{{Name: "plan", Agent: "plan", Input: tmpl("{{input}}")}},
		{{Name: "correctness", Agent: "correctness", Input: tmpl("{{steps.plan.output}}")}, {Name: "style", Agent: "style", Input: tmpl("{{steps.plan.output}}")}},
		{{Name: "report", Agent: "report", Input: tmpl("{{steps.correctness.output}}\n{{steps.style.output}}")}},
	}}
	kc := base
	kc.Provider, kc.Tools, kc.Model, kc.Agent, kc.MaxTurns = agents.NewProvider(p), reg, "pipeline", agents.SessionAgent(p.Name), len(p.Stages)+1
	pk, err := kernel.New(kc)
	if err != nil {
		t.Fatal(err)
	}
	return serve.Agent{Name: agents.SessionAgent(p.Name), Kind: "pipeline", Description: p.Description, Model: "pipeline", Kernel: pk}
}

// TestPipelineServe: POST /v1/pipelines/review/runs runs the pipeline
// through kernel serve: plan, then correctness and style together, then
// report (whose script answers only when both reviews reached it); the
// session's stream carries every step's child run nested under its call
// (agent.event), in stage order; its transcript has each step's answer
// with the child session it came from, and each child session is linked
// to the pipeline's. On Badger and on PostgreSQL.
func TestPipelineServe(t *testing.T) {
	t.Run("badger", func(t *testing.T) {
		testPipelineServe(t, rigOpts{badger: filepath.Join(t.TempDir(), "db"), pipeline: true})
	})
	t.Run("postgres", func(t *testing.T) {
		testPipelineServe(t, rigOpts{pg: pgtest.Shared(t).Migrated(t), replica: "replica-a", keys: filepath.Join(t.TempDir(), "keys.json"), pipeline: true})
	})
}

func testPipelineServe(t *testing.T, o rigOpts) {
	r := newRig(t, o)
	a := r.must(200, "GET", "/v1/agents/pipeline:review", r.reader, nil)
	if a["kind"] != "pipeline" || len(a["tools"].([]any)) != 4 {
		t.Fatalf("pipeline: %v", a)
	}
	key := r.key("pipe", "", "run", "read", "agent:pipeline:review")
	run := r.must(202, "POST", "/v1/pipelines/review/runs", key, map[string]any{"prompt": "review notes.txt", "title": "pipe"})["run"].(map[string]any)
	sid := run["session_id"].(string)
	s := r.waitStatus(key, sid, "idle")
	if s["agent"] != "pipeline:review" {
		t.Fatalf("session: %v", s)
	}
	got := r.must(200, "GET", "/v1/sessions/"+sid+"/runs/"+run["id"].(string), key, nil)
	if got["status"] != "completed" || got["output"] != "REPORT: notes.txt is fine" {
		t.Fatalf("run: %v", got)
	}

	// The stream: each step's child run, nested under its call.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	evs, err := r.stream(ctx, key, sid, "", func(e sseEvent) bool { return e.typ == "run.completed" })
	if err != nil {
		t.Fatal(err)
	}
	started, completed := map[string]int{}, map[string]int{}
	children := map[string]string{}
	for i, e := range evs {
		if e.typ != "agent.event" {
			continue
		}
		var ae struct {
			CallID    string `json:"call_id"`
			Agent     string `json:"agent"`
			SessionID string `json:"session_id"`
			Depth     int    `json:"depth"`
			Event     struct {
				Type string `json:"type"`
			} `json:"event"`
		}
		if err := json.Unmarshal([]byte(e.data), &ae); err != nil {
			t.Fatalf("agent.event %s: %v", e.data, err)
		}
		if ae.Depth != 1 || ae.CallID != "step_"+ae.Agent {
			t.Fatalf("agent.event not nested under its step's call: %s", e.data)
		}
		children[ae.Agent] = ae.SessionID
		switch ae.Event.Type {
		case "run.started":
			started[ae.Agent] = i
		case "run.completed":
			completed[ae.Agent] = i
		}
	}
	for _, step := range []string{"plan", "correctness", "style", "report"} {
		if _, ok := started[step]; !ok {
			t.Fatalf("no run.started of step %s in the stream", step)
		}
		if _, ok := completed[step]; !ok {
			t.Fatalf("no run.completed of step %s in the stream", step)
		}
	}
	if completed["plan"] > started["correctness"] || completed["plan"] > started["style"] ||
		completed["correctness"] > started["report"] || completed["style"] > started["report"] {
		t.Fatalf("steps out of stage order: started %v completed %v", started, completed)
	}

	// The transcript: each step's answer, with the child session it came from.
	msgs := r.must(200, "GET", "/v1/sessions/"+sid+"/messages", key, nil)["messages"].([]any)
	answered := map[string]string{}
	for _, m := range msgs {
		m := m.(map[string]any)
		if c, ok := m["child"].(map[string]any); ok {
			answered[c["agent"].(string)] = c["session_id"].(string)
			if c["agent"] == "report" && m["content"] != "REPORT: notes.txt is fine" {
				t.Fatalf("report step answered %v", m)
			}
		}
	}
	if len(answered) != 4 {
		t.Fatalf("steps answered with a child session: %v", answered)
	}
	for step, csid := range answered {
		if children[step] != csid {
			t.Fatalf("step %s: transcript names child %s, stream %s", step, csid, children[step])
		}
		child, err := r.store.Load(context.Background(), csid)
		if err != nil {
			t.Fatal(err)
		}
		if p := child.Meta.Parent; p == nil || p.SessionID != sid || p.Depth != 1 || child.Meta.Agent != step {
			t.Fatalf("child %s of step %s: meta %+v", csid, step, child.Meta)
		}
		// Readable by the parent's owner, with its link and transcript.
		cv := r.must(200, "GET", "/v1/sessions/"+csid, key, nil)
		if p, _ := cv["parent"].(map[string]any); p["session_id"] != sid || p["call_id"] != "step_"+step || cv["status"] != "idle" {
			t.Fatalf("GET child %s: %v", csid, cv)
		}
		cm := r.must(200, "GET", "/v1/sessions/"+csid+"/messages", key, nil)["messages"].([]any)
		if last := cm[len(cm)-1].(map[string]any); last["role"] != "assistant" || last["content"] != "" && !strings.Contains(last["content"].(string), ":") {
			t.Fatalf("child %s messages: %v", csid, cm)
		}
		// Not by another owner; never run on its own.
		r.must(404, "GET", "/v1/sessions/"+csid, r.alice, nil)
		r.must(409, "POST", "/v1/sessions/"+csid+"/runs", key, map[string]any{"prompt": "again"})
		r.must(409, "DELETE", "/v1/sessions/"+csid, key, nil)
	}
}

// TestAgentScopesActOnlyOnTheirAgents: in one tenant, a key restricted to
// agent:writer can neither see nor decide the approval a reviewer session
// waits for (403), nor cancel, post to or delete that session, nor decide
// a top-level one; a key restricted to agent:reviewer sees it in its
// inbox and decides it. GET /v1/sessions?agent= lists one agent's
// sessions, and a restricted key lists only its agents'.
func TestAgentScopesActOnlyOnTheirAgents(t *testing.T) {
	r := newRig(t, rigOpts{badger: filepath.Join(t.TempDir(), "db"), reviewer: reviewerScript, reviewerTools: []string{"write_file"}})
	team := r.key("team", "acme", "run", "read", "approve")
	writer := r.key("team-writer", "acme", "run", "read", "approve", "agent:writer")
	reviewer := r.key("team-reviewer", "acme", "run", "read", "approve", "agent:reviewer")

	sid := r.must(201, "POST", "/v1/sessions", team, map[string]any{"agent": "reviewer"})["id"].(string)
	r.must(202, "POST", "/v1/sessions/"+sid+"/runs", team, map[string]any{"prompt": "review"})
	pending := r.waitStatus(team, sid, "awaiting_approval")["pending_approval"].(map[string]any)
	top := r.newSession(team)
	r.must(202, "POST", "/v1/sessions/"+top+"/runs", team, map[string]any{"prompt": "go"})
	r.waitStatus(team, top, "awaiting_approval")

	// The writer's key: nothing of the reviewer's or the top level's to decide.
	if n := len(r.must(200, "GET", "/v1/approvals", writer, nil)["approvals"].([]any)); n != 0 {
		t.Fatalf("a key restricted to writer sees %d approvals", n)
	}
	for _, s := range []string{sid, top} {
		if p := r.do("POST", "/v1/sessions/"+s+"/approval", writer, map[string]any{"decision": "approve"}); p.status != 403 {
			t.Fatalf("a key restricted to writer decided session %s's approval: %d %s", s, p.status, p.body)
		}
		if p := r.do("POST", "/v1/sessions/"+s+"/messages", writer, map[string]any{"text": "x", "kind": "followup"}); p.status != 403 {
			t.Fatalf("a key restricted to writer posted to session %s: %d %s", s, p.status, p.body)
		}
		if p := r.do("DELETE", "/v1/sessions/"+s, writer, nil); p.status != 403 {
			t.Fatalf("a key restricted to writer deleted session %s: %d %s", s, p.status, p.body)
		}
	}
	runs := r.must(200, "GET", "/v1/sessions/"+sid+"/runs", team, nil)["runs"].([]any)
	rid := runs[len(runs)-1].(map[string]any)["id"].(string)
	if p := r.do("POST", "/v1/sessions/"+sid+"/runs/"+rid+"/cancel", writer, nil); p.status != 403 {
		t.Fatalf("a key restricted to writer cancelled a reviewer run: %d %s", p.status, p.body)
	}
	if s := r.must(200, "GET", "/v1/sessions/"+sid, team, nil); s["status"] != "awaiting_approval" {
		t.Fatalf("after the writer's refused decision the session is %v", s["status"])
	}

	// Listing by agent.
	ids := func(key, query string) []string {
		var out []string
		for _, s := range r.must(200, "GET", "/v1/sessions"+query, key, nil)["sessions"].([]any) {
			out = append(out, s.(map[string]any)["id"].(string))
		}
		return out
	}
	if got := ids(team, "?agent=reviewer"); len(got) != 1 || got[0] != sid {
		t.Fatalf("?agent=reviewer lists %v, want [%s]", got, sid)
	}
	if got := ids(team, "?agent=default"); len(got) != 1 || got[0] != top {
		t.Fatalf("?agent=default lists %v, want [%s]", got, top)
	}
	if got := ids(reviewer, ""); len(got) != 1 || got[0] != sid {
		t.Fatalf("a key restricted to reviewer lists %v, want [%s]", got, sid)
	}
	if got := ids(writer, ""); len(got) != 0 {
		t.Fatalf("a key restricted to writer lists %v", got)
	}
	r.must(403, "GET", "/v1/sessions?agent=default", reviewer, nil)
	r.must(400, "GET", "/v1/sessions?agent=nope", team, nil)

	// The reviewer's key sees it and decides it.
	inbox := r.must(200, "GET", "/v1/approvals", reviewer, nil)["approvals"].([]any)
	if len(inbox) != 1 || inbox[0].(map[string]any)["id"] != pending["id"] {
		t.Fatalf("a key restricted to reviewer sees %v", inbox)
	}
	r.must(202, "POST", "/v1/sessions/"+sid+"/approval", reviewer, map[string]any{"decision": "reject", "note": "no writes"})
	r.waitStatus(team, sid, "idle")
}
