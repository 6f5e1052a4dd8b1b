package serve_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestIsolation: another key (even an admin) cannot list, read, stream,
// steer, run, approve, cancel, resume, export or delete a session it does
// not own: every endpoint answers 404, as for a session that does not
// exist, and nothing changes.
func TestIsolation(t *testing.T) {
	r := newRig(t, rigOpts{})
	sid := r.newSession(r.alice)
	run := r.must(202, "POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "update notes"})["run"].(map[string]any)
	r.waitStatus(r.alice, sid, "awaiting_approval")
	rid := run["id"].(string)
	base := "/v1/sessions/" + sid
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", base, nil},
		{"DELETE", base, nil},
		{"GET", base + "/messages", nil},
		{"POST", base + "/messages", map[string]any{"text": "psst", "kind": "followup"}},
		{"GET", base + "/export", nil},
		{"GET", base + "/events", nil},
		{"POST", base + "/runs", map[string]any{"prompt": "mine now"}},
		{"GET", base + "/runs", nil},
		{"GET", base + "/runs/" + rid, nil},
		{"POST", base + "/runs/" + rid + "/cancel", nil},
		{"POST", base + "/resume", nil},
		{"GET", base + "/approval", nil},
		{"POST", base + "/approval", map[string]any{"decision": "approve"}},
	} {
		p := r.do(c.method, c.path, r.bob, c.body)
		if p.status != 404 || !strings.Contains(string(p.body), "not found") {
			t.Errorf("bob: %s %s = %d %s, want 404", c.method, c.path, p.status, p.body)
		}
	}
	if got := r.must(200, "GET", "/v1/sessions", r.bob, nil)["sessions"].([]any); len(got) != 0 {
		t.Errorf("bob lists %d sessions, want none", len(got))
	}
	if got := r.must(200, "GET", "/v1/approvals", r.bob, nil)["approvals"].([]any); len(got) != 0 {
		t.Errorf("bob sees %d approvals, want none", len(got))
	}
	// Nothing bob did changed alice's session.
	s := r.must(200, "GET", base, r.alice, nil)
	if s["status"] != "awaiting_approval" || s["totals"].(map[string]any)["messages"].(float64) != 4 {
		t.Fatalf("alice's session after bob's attempts: %v", s)
	}
	if n := len(r.must(200, "GET", "/v1/approvals", r.alice, nil)["approvals"].([]any)); n != 1 {
		t.Fatalf("alice's approvals = %d, want 1", n)
	}
}

// TestTenant: keys of one tenant share its sessions; a key outside it
// does not see them.
func TestTenant(t *testing.T) {
	r := newRig(t, rigOpts{script: "steps:\n  - text: \"hi\"\n"})
	ops1 := r.key("ops-ci", "ops", "run", "read")
	ops2 := r.key("ops-oncall", "ops", "read", "approve")
	sid := r.newSession(ops1)
	r.must(200, "GET", "/v1/sessions/"+sid, ops2, nil)
	r.must(404, "GET", "/v1/sessions/"+sid, r.alice, nil)
	// The stream is isolated too, not only its first answer.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.stream(ctx, r.alice, sid, "", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("alice streams ops' session: %v", err)
	}
}

// TestRevokedKey: a revoked key is refused at once by the running server.
func TestRevokedKey(t *testing.T) {
	r := newRig(t, rigOpts{})
	tmp := r.key("temp", "", "read")
	r.must(200, "GET", "/v1/sessions", tmp, nil)
	if _, err := r.keys.Revoke("temp"); err != nil {
		t.Fatal(err)
	}
	r.must(401, "GET", "/v1/sessions", tmp, nil)
	if strings.Contains(r.access.String(), tmp[4:]) {
		t.Fatal("the access log holds a key")
	}
}
