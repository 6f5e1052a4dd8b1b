package serve_test

import (
	"strings"
	"testing"
)

// TestTypedSecretsAreScrubbed is issue 36's sixth finding, second part: an
// API key a person types into a session's title, its metadata, a prompt,
// a steered or follow-up message or an approval's note is redacted before
// it is stored, as a tool's output is. Without the scrubbing on the way
// in, the key is stored and served back as typed.
func TestTypedSecretsAreScrubbed(t *testing.T) {
	r := newRig(t, rigOpts{script: defaultScript + "  - text: \"Follow-up done.\"\n"})
	leak := r.key("leaked", "", "read") // a real key, in the format the scrubber knows
	sid := r.must(201, "POST", "/v1/sessions", r.alice, map[string]any{
		"title": "debug " + leak, "metadata": map[string]string{"ticket": "OPS-1 key " + leak},
	})["id"].(string)
	r.must(202, "POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "update notes; my key is " + leak})
	r.waitStatus(r.alice, sid, "awaiting_approval")
	r.must(202, "POST", "/v1/sessions/"+sid+"/approval", r.alice, map[string]any{"decision": "approve", "note": "ok, " + leak})
	r.waitStatus(r.alice, sid, "idle")
	r.must(202, "POST", "/v1/sessions/"+sid+"/messages", r.alice, map[string]any{"text": "and use " + leak, "kind": "followup"})
	r.waitStatus(r.alice, sid, "idle")
	for _, path := range []string{"/v1/sessions/" + sid, "/v1/sessions/" + sid + "/messages", "/v1/sessions/" + sid + "/export", "/v1/sessions"} {
		body := string(r.do("GET", path, r.alice, nil).body)
		if strings.Contains(body, leak) {
			t.Errorf("GET %s serves the typed key:\n%s", path, body)
		}
	}
	exp := string(r.do("GET", "/v1/sessions/"+sid+"/export", r.alice, nil).body)
	for _, want := range []string{"debug [REDACTED]", "my key is [REDACTED]", "and use [REDACTED]", "ok, [REDACTED]"} {
		if !strings.Contains(exp, want) {
			t.Errorf("the export lacks %q:\n%s", want, exp)
		}
	}
}
