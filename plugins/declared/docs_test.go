package declared_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/plugins/builtin"
	"github.com/agentkernel/agentkernel/sandbox"
)

// TestDocsToolsExample loads the worked example of docs/tools.md as it is
// written and calls its tools: the HTTP ones against a local server
// standing for tickets.example.com (through the test network, over TLS's
// port), the command in a workspace, the inline answer.
func TestDocsToolsExample(t *testing.T) {
	b, err := os.ReadFile("../../docs/tools.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- example: kernel.yaml -->\n```yaml\n")
	if !ok {
		t.Fatal("docs/tools.md has no example block")
	}
	example, _, _ := strings.Cut(rest, "```")
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == "POST" {
			io.WriteString(w, `{"id": 99}`)
			return
		}
		io.WriteString(w, `{"id": "T-7", "title": "Disk full on db-2", "status": "open", "assignee": {"name": "ana", "id": 4}, "history": []}`)
	})
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("1\n2\n"), 0o600)
	os.WriteFile(filepath.Join(ws, "b.txt"), []byte("3\n"), 0o600)
	o := options(a, env{"TICKETS_TOKEN": "tk-docs-1234567"}, "tickets.example.com")
	o.Workspace = ws
	o.CommandGrant = func(extra sandbox.Grant, env []string) (sandbox.Grant, []string) {
		g := builtin.CommandGrant(ws, builtin.Config{CommandSandbox: extra, CommandEnv: env})
		return g, g.Env
	}
	// The example's URLs are https: the test server speaks plain HTTP on the
	// port the fake network leads every connection to.
	tools := mustBuild(t, strings.ReplaceAll(example, "https://tickets.example.com", "http://tickets.example.com"), o)
	res, err := call(t, tools["get_ticket"], map[string]string{"id": "T-7"})
	if err != nil || res.Content != `{"assignee":"ana","status":"open","title":"Disk full on db-2"}` {
		t.Errorf("get_ticket: %q %v", res.Content, err)
	}
	r := a.last(t)
	if r.Path != "/api/v2/tickets/T-7" || r.RawQuery != "fields=title,status,assignee" || r.Header.Get("Authorization") != "Bearer tk-docs-1234567" {
		t.Errorf("get_ticket sent %+v", r)
	}
	if _, err := call(t, tools["comment_ticket"], map[string]string{"id": "T-7", "text": "looking"}); err != nil {
		t.Error(err)
	}
	if r := a.last(t); r.Body != `{"body":"looking","internal":true}` {
		t.Errorf("comment_ticket sent %s", r.Body)
	}
	res, err = call(t, tools["count_lines"], map[string]any{"files": []string{"a.txt", "b.txt"}})
	if err != nil || !strings.Contains(res.Content, "3 total") {
		t.Errorf("count_lines: %q %v", res.Content, err)
	}
	res, err = call(t, tools["release_freeze"], map[string]string{"env": "production"})
	if err != nil || res.Content != "Releases to production are frozen until Monday 09:00 UTC. Ask #release for an exception." {
		t.Errorf("release_freeze: %q %v", res.Content, err)
	}
}
