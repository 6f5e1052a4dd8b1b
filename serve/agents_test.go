package serve_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
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
