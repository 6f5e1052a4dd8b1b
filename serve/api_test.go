package serve_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunWithApproval: the whole path of a run over HTTP: create a
// session, start a run, it stops for an approval (with a diff), approve
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
	diff := ap["diff"].(map[string]any)["unified"].(string)
	if !strings.Contains(diff, "+new line") || !strings.Contains(diff, "--- a/notes.txt") {
		t.Fatalf("diff = %q", diff)
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
