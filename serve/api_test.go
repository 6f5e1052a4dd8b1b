package serve_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/schema"
	"github.com/agentkernel/agentkernel/serve"
)

func schemaOf(file string) (*schema.Schema, error) { return schema.Embedded(file) }

// TestRunWithApproval: the whole path of a run over HTTP: create a
// session, start a run, it stops for an approval (with its preview), approve
// it, the run completes, the file is written.
func TestRunWithApproval(t *testing.T) {
	r := newRig(t, rigOpts{})
	sid := r.newSession(r.alice)
	run := r.must(202, "POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "update notes"})["run"].(map[string]any)
	if run["status"] != "running" || run["principal"] != "alice" {
		t.Fatalf("run = %v", run)
	}
	s := r.waitStatus(r.alice, sid, "awaiting_approval")
	ap := s["pending_approval"].(map[string]any)
	if ap["tool"] != "write_file" || ap["rule_id"] != "ask-writes" || ap["message"] != "write to notes.txt" {
		t.Fatalf("approval = %v", ap)
	}
	// The preview is write_file's own: the diff exactly as diff -u
	// prints it; the context is this run's prompt and the model's words.
	pv := ap["preview"].(map[string]any)
	file := pv["files"].([]any)[0].(map[string]any)
	if want := "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1,2 @@\n hello\n+new line\n"; file["diff"] != want || pv["refused"] != nil {
		t.Fatalf("preview = %v; want the diff %q", pv, want)
	}
	if c := ap["context"].(map[string]any); c["prompt"] != "update notes" || c["said"] != "Writing." || c["seq"].(float64) != 4 || c["prompt_seq"].(float64) != 1 {
		t.Fatalf("context = %v", c)
	}
	list := r.must(200, "GET", "/v1/approvals", r.alice, nil)["approvals"].([]any)
	if len(list) != 1 {
		t.Fatalf("approvals = %v", list)
	}
	r.must(202, "POST", "/v1/sessions/"+sid+"/approval", r.alice, map[string]any{"decision": "approve", "note": "ok", "approval_id": ap["id"]})
	s = r.waitStatus(r.alice, sid, "idle")
	if s["totals"].(map[string]any)["turns"].(float64) != 3 {
		t.Fatalf("session = %v", s)
	}
	runs := r.must(200, "GET", "/v1/sessions/"+sid+"/runs", r.alice, nil)["runs"].([]any)
	last := runs[len(runs)-1].(map[string]any)
	if last["kind"] != "approve" || last["stop_reason"] != "completed" || last["output"] != "Done: notes.txt updated." {
		t.Fatalf("last run = %v", last)
	}
	r.must(200, "GET", "/v1/sessions/"+sid+"/runs/"+last["id"].(string), r.alice, nil)
	msgs := r.must(200, "GET", "/v1/sessions/"+sid+"/messages", r.alice, nil)
	if n := len(msgs["messages"].([]any)); n != 6 {
		t.Fatalf("%d messages: %v", n, msgs)
	}
	// Who decided is in the session, with the call's result.
	if ar, _ := msgs["messages"].([]any)[4].(map[string]any)["approval"].(map[string]any); ar["by"] != "alice" || ar["approved"] != true || ar["note"] != "ok" {
		t.Fatalf("the write's result records approval %v, want by alice", ar)
	}
	// The stream replays the run, approval.resolved naming who decided.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evs, err := r.stream(ctx, r.alice, sid, "", func(e sseEvent) bool { return e.typ == "run.completed" && strings.Contains(e.data, "Done") })
	if err != nil {
		t.Fatal(err)
	}
	var resolved string
	for _, e := range evs {
		if e.typ == "approval.resolved" {
			resolved = e.data
		}
	}
	if !strings.Contains(resolved, `"by":"alice"`) {
		t.Fatalf("approval.resolved = %s, want by alice", resolved)
	}
}

// TestErrors: every kind of bad request gets its status and an error
// naming what is wrong, as the OpenAPI document says.
func TestErrors(t *testing.T) {
	r := newRig(t, rigOpts{limits: serve.Limits{MaxBodyBytes: 4096}})
	sid := r.newSession(r.alice)
	errOf := func(p resp) map[string]any { return p.json(t)["error"].(map[string]any) }
	cases := []struct {
		name, method, path, key string
		body                    any
		status                  int
		field, state, contains  string
	}{
		{"no key", "GET", "/v1/sessions", "", nil, 401, "", "", "API key is required"},
		{"unknown key", "GET", "/v1/sessions", "aks_000000000000_nope", nil, 401, "", "", "unknown or revoked"},
		{"not a kernel key", "GET", "/v1/sessions", "sk-whatever", nil, 401, "", "", "unknown or revoked"},
		{"missing scope", "POST", "/v1/sessions", r.reader, map[string]any{}, 403, "", "", "lacks the scope"},
		{"malformed json", "POST", "/v1/sessions/" + sid + "/runs", r.alice, `{"prompt": "x"`, 400, "", "", "ends inside"},
		{"syntax error", "POST", "/v1/sessions/" + sid + "/runs", r.alice, `{"prompt" "x"}`, 400, "", "", "malformed JSON"},
		{"wrong type names the field", "POST", "/v1/sessions/" + sid + "/runs", r.alice, `{"prompt": 42}`, 400, "prompt", "", `field "prompt"`},
		{"unknown field", "POST", "/v1/sessions/" + sid + "/runs", r.alice, `{"prompt": "x", "promt": "y"}`, 400, "promt", "", "unknown field \"promt\"; did you mean `prompt`?"},
		{"unknown field, nothing near", "POST", "/v1/sessions/" + sid + "/runs", r.alice, `{"prompt": "x", "colour": "y"}`, 400, "colour", "", "unknown field \"colour\""},
		{"missing field", "POST", "/v1/sessions/" + sid + "/runs", r.alice, `{}`, 400, "prompt", "", "prompt is required"},
		{"bad enum", "POST", "/v1/sessions/" + sid + "/runs", r.alice, `{"prompt":"x","if_busy":"wait"}`, 400, "if_busy", "", "reject, queue or steer"},
		{"bad metadata key", "POST", "/v1/sessions", r.alice, `{"metadata":{"a b":"c"}}`, 400, "metadata.a b", "", "metadata key"},
		{"empty body", "POST", "/v1/sessions", r.alice, ``, 400, "", "", "empty"},
		{"too large", "POST", "/v1/sessions", r.alice, `{"title":"` + strings.Repeat("x", 5000) + `"}`, 413, "", "", "larger than"},
		{"bad query", "GET", "/v1/sessions?limit=0", r.alice, nil, 400, "limit", "", "from 1 to 500"},
		{"bad status filter", "GET", "/v1/sessions?status=sleeping", r.alice, nil, 400, "status", "", "want one of"},
		{"bad cursor", "GET", "/v1/sessions?cursor=zzz", r.alice, nil, 400, "cursor", "", "cursor"},
		{"unknown session", "GET", "/v1/sessions/nope", r.alice, nil, 404, "", "", `session "nope" not found`},
		{"unknown run", "GET", "/v1/sessions/" + sid + "/runs/run_nope", r.alice, nil, 404, "", "", `run "run_nope"`},
		{"unknown endpoint", "GET", "/v1/nothing", r.alice, nil, 404, "", "", "no endpoint"},
		{"approve with nothing pending", "POST", "/v1/sessions/" + sid + "/approval", r.alice, map[string]any{"decision": "approve"}, 409, "", "idle", "no pending approval"},
		{"bad decision", "POST", "/v1/sessions/" + sid + "/approval", r.alice, map[string]any{"decision": "maybe"}, 400, "decision", "", "approve or reject"},
		{"no approval to show", "GET", "/v1/sessions/" + sid + "/approval", r.alice, nil, 404, "", "", "no pending approval"},
		{"steer with no run", "POST", "/v1/sessions/" + sid + "/messages", r.alice, map[string]any{"text": "hi"}, 409, "", "idle", "no run in flight"},
		{"resume with nothing interrupted", "POST", "/v1/sessions/" + sid + "/resume", r.alice, nil, 409, "", "idle", "no interrupted run"},
		{"bad Last-Event-ID", "GET", "/v1/sessions/" + sid + "/events?after=x", r.alice, nil, 400, "after", "", "event id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := r.do(c.method, c.path, c.key, c.body)
			if p.status != c.status {
				t.Fatalf("status %d, want %d: %s", p.status, c.status, p.body)
			}
			e := errOf(p)
			if c.field != "" && e["field"] != c.field {
				t.Errorf("field = %v, want %q", e["field"], c.field)
			}
			if c.state != "" && e["state"] != c.state {
				t.Errorf("state = %v, want %q", e["state"], c.state)
			}
			if !strings.Contains(e["message"].(string), c.contains) {
				t.Errorf("message %q does not say %q", e["message"], c.contains)
			}
		})
	}
	t.Run("wrong content type", func(t *testing.T) {
		req, _ := http.NewRequest("POST", r.url+"/v1/sessions", strings.NewReader(`title=x`))
		req.Header.Set("Authorization", "Bearer "+r.alice)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 415 {
			t.Fatalf("form post = %d, want 415", res.StatusCode)
		}
	})
	t.Run("cancel a finished run", func(t *testing.T) {
		r2 := newRig(t, rigOpts{script: "steps:\n  - text: \"hi\"\n"})
		sid := r2.newSession(r2.alice)
		run := r2.must(202, "POST", "/v1/sessions/"+sid+"/runs", r2.alice, map[string]any{"prompt": "x"})["run"].(map[string]any)
		r2.waitStatus(r2.alice, sid, "idle")
		p := r2.do("POST", "/v1/sessions/"+sid+"/runs/"+run["id"].(string)+"/cancel", r2.alice, nil)
		if p.status != 409 || errOf(p)["state"] != "completed" {
			t.Fatalf("cancel finished = %d %s", p.status, p.body)
		}
	})
}

// TestEndpoints exercises every endpoint's success path once.
func TestEndpoints(t *testing.T) {
	r := newRig(t, rigOpts{script: "steps:\n  - text: \"one\"\n  - text: \"two\"\n  - text: \"three\"\n"})
	if h := r.must(200, "GET", "/healthz", "", nil); h["status"] != "ok" {
		t.Fatalf("healthz = %v", h)
	}
	if h := r.must(200, "GET", "/readyz", "", nil); h["status"] != "ready" {
		t.Fatalf("readyz = %v", h)
	}
	if doc := r.must(200, "GET", "/v1/openapi.json", "", nil); doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi = %v", doc["openapi"])
	}
	if w := r.must(200, "GET", "/v1/whoami", r.alice, nil); w["name"] != "alice" {
		t.Fatalf("whoami = %v", w)
	}
	tools := r.must(200, "GET", "/v1/tools", r.reader, nil)["tools"].([]any)
	if len(tools) != 4 || tools[0].(map[string]any)["source"] != "builtin" {
		t.Fatalf("tools = %v", tools)
	}
	if p := r.must(200, "GET", "/v1/policy", r.reader, nil); p["revision"] != "7" || p["name"] != "serve-test" {
		t.Fatalf("policy = %v", p)
	}
	ex := r.must(200, "POST", "/v1/policy/explain", r.reader, map[string]any{"call": map[string]any{"tool": "edit_file", "args": map[string]any{"path": "a", "old": "x", "new": "y"}}})
	if c := ex["call"].(map[string]any); c["decision"].(map[string]any)["effect"] != "ask" || !strings.Contains(ex["text"].(string), "ask-writes") {
		t.Fatalf("explain = %v", ex)
	}
	bad := r.do("POST", "/v1/policy/explain", r.reader, map[string]any{"cal": map[string]any{"tool": "read_file"}})
	if bad.status != 400 {
		t.Fatalf("explain of a bad input = %d %s", bad.status, bad.body)
	}

	sid := r.must(201, "POST", "/v1/sessions", r.alice, map[string]any{"title": "first", "metadata": map[string]string{"ticket": "OPS-1"}})["id"].(string)
	s := r.must(200, "GET", "/v1/sessions/"+sid, r.alice, nil)
	if s["title"] != "first" || s["metadata"].(map[string]any)["ticket"] != "OPS-1" || s["status"] != "idle" {
		t.Fatalf("session = %v", s)
	}
	r.must(202, "POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "hello"})
	r.waitStatus(r.alice, sid, "idle")
	// A follow-up with no run in flight runs at once.
	fu := r.must(202, "POST", "/v1/sessions/"+sid+"/messages", r.alice, map[string]any{"text": "and then?", "kind": "followup"})
	if fu["run"] == nil {
		t.Fatalf("follow-up without a run = %v, want a run", fu)
	}
	r.waitStatus(r.alice, sid, "idle")
	if got := r.must(200, "GET", "/v1/sessions/"+sid+"/messages?after=2&limit=1", r.alice, nil)["messages"].([]any); len(got) != 1 || got[0].(map[string]any)["seq"].(float64) != 3 {
		t.Fatalf("messages after 2 = %v", got)
	}
	exp := r.do("GET", "/v1/sessions/"+sid+"/export", r.alice, nil)
	lines := strings.Split(strings.TrimSpace(string(exp.body)), "\n")
	if exp.status != 200 || len(lines) != 5 || !strings.Contains(lines[0], `"type":"session"`) {
		t.Fatalf("export = %d %s", exp.status, exp.body)
	}
	sch, err := schemaOf("session-export.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range lines {
		if err := sch.ValidateJSON([]byte(l)); err != nil {
			t.Fatalf("export line %d: %v\n%s", i+1, err, l)
		}
	}
	// Paging and the status filter.
	for range 4 {
		r.newSession(r.alice)
	}
	page := r.must(200, "GET", "/v1/sessions?limit=2", r.alice, nil)
	next, _ := page["next_cursor"].(string)
	if len(page["sessions"].([]any)) != 2 || next == "" {
		t.Fatalf("page 1 = %v", page)
	}
	page2 := r.must(200, "GET", "/v1/sessions?limit=2&cursor="+next, r.alice, nil)
	page3 := r.must(200, "GET", "/v1/sessions?limit=2&cursor="+page2["next_cursor"].(string), r.alice, nil)
	seen := map[string]bool{}
	for _, p := range []map[string]any{page, page2, page3} {
		for _, s := range p["sessions"].([]any) {
			id := s.(map[string]any)["id"].(string)
			if seen[id] {
				t.Fatalf("session %s on two pages", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != 5 || page3["next_cursor"] != nil {
		t.Fatalf("paged through %d sessions, want 5 (last page %v)", len(seen), page3)
	}
	if idle := r.must(200, "GET", "/v1/sessions?status=awaiting_approval", r.alice, nil)["sessions"].([]any); len(idle) != 0 {
		t.Fatalf("awaiting_approval filter = %v", idle)
	}
	r.must(204, "DELETE", "/v1/sessions/"+sid, r.alice, nil)
	r.must(404, "GET", "/v1/sessions/"+sid, r.alice, nil)
}
