package serve_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestApprovalPreviewIsTheTools: the inbox shows what edit_file itself
// would do. "aa" in "aaa" matches twice (overlapping), so the tool
// refuses: the preview says so with the tool's error, and approving
// leaves the file as it was. Old text given with LF in a CRLF file is
// matched with CRLF, so the call succeeds: the preview shows its diff,
// and approving writes exactly that.
func TestApprovalPreviewIsTheTools(t *testing.T) {
	cases := []struct {
		name, file, args string
		refused          string // a substring of the refusal; "" when the call goes through
		diff, after      string
	}{
		{name: "aa in aaa", file: "aaa\n", args: `{path: f.txt, old: "aa", new: "b"}`,
			refused: "old text occurs 2 times", after: "aaa\n"},
		{name: "CRLF file", file: "one\r\ntwo\r\n", args: `{path: f.txt, old: "one\ntwo", new: "1\n2"}`,
			diff:  "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n-one\r\n-two\r\n+1\r\n+2\r\n",
			after: "1\r\n2\r\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			script := "turns:\n  - text: \"Editing.\"\n    tool_calls:\n      - name: edit_file\n        args: " + c.args + "\n  - text: \"Done.\"\n"
			r := newRig(t, rigOpts{script: script})
			if err := os.WriteFile(filepath.Join(r.ws, "f.txt"), []byte(c.file), 0o644); err != nil {
				t.Fatal(err)
			}
			sid := r.newSession(r.alice)
			r.must(202, "POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "edit f.txt"})
			r.waitStatus(r.alice, sid, "awaiting_approval")
			ap := r.must(200, "GET", "/v1/sessions/"+sid+"/approval", r.alice, nil)
			pv := ap["preview"].(map[string]any)
			if c.refused != "" {
				if pv["refused"] != true || !strings.Contains(pv["summary"].(string), c.refused) || pv["files"] != nil {
					t.Fatalf("preview = %v; want refused: %s", pv, c.refused)
				}
			} else {
				files, _ := pv["files"].([]any)
				if pv["refused"] != nil || len(files) != 1 || files[0].(map[string]any)["diff"] != c.diff {
					t.Fatalf("preview = %v; want the diff %q", pv, c.diff)
				}
			}
			r.must(202, "POST", "/v1/sessions/"+sid+"/approval", r.alice, map[string]any{"decision": "approve", "approval_id": ap["id"]})
			r.waitStatus(r.alice, sid, "idle")
			msgs := r.must(200, "GET", "/v1/sessions/"+sid+"/messages", r.alice, nil)["messages"].([]any)
			result := msgs[2].(map[string]any)
			if isErr, _ := result["is_error"].(bool); isErr != (c.refused != "") {
				t.Fatalf("the call's result %v disagrees with the preview %v", result, pv)
			}
			if c.refused != "" && !strings.Contains(result["content"].(string), pv["summary"].(string)) {
				t.Fatalf("the call failed with %q; the preview said %q", result["content"], pv["summary"])
			}
			if got, _ := os.ReadFile(filepath.Join(r.ws, "f.txt")); string(got) != c.after {
				t.Fatalf("f.txt = %q, want %q", got, c.after)
			}
		})
	}
}
