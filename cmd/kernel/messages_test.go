package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/mcptest"
)

// What a newcomer reads when something is wrong, or to know what to do
// next, each held by a golden file in testdata/messages (go test -update
// rewrites them; read the change before accepting it).

// normalize replaces what differs between runs: the test's directories,
// loopback ports, session ids, times, durations and the login name.
func normalize(s string, dirs map[string]string) string {
	for d, name := range dirs {
		s = strings.ReplaceAll(s, d, name)
	}
	for _, r := range []struct {
		re   *regexp.Regexp
		with string
	}{
		{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:PORT"},
		{regexp.MustCompile(`\b[0-9a-hjkmnp-tv-z]{16}\b`), "SESSION"},
		{regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`), "TIME"},
		{regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s)\b`), "DURATION"},
		{regexp.MustCompile(`\bby ` + regexp.QuoteMeta(cliPrincipal()) + `\b`), "by USER"},
	} {
		s = r.re.ReplaceAllString(s, r.with)
	}
	return s
}

// TestMessagesConfig: a configuration error points at the culprit line,
// shows it with a caret under the column, and says what usually causes
// it; a misspelt field gets the nearest field's name.
func TestMessagesConfig(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		// yaml.v3 names the line above the culprit for each of these.
		{"yaml-tab", "model:\n  name: m\n\tprovider: openai\n"},
		{"yaml-unclosed-list", "tools:\n  builtin:\n    enable: [read_file, list_dir\nlimits:\n  max_turns: 3\n"},
		{"yaml-indent", "limits:\n  max_turns: 3\n   tool_timeout: 2m\n"},
		{"yaml-missing-colon", "model:\n  name: m\n  provider openai\nlimits:\n  max_turns: 3\n"},
		{"yaml-unclosed-quote", "system_prompt: \"You are careful.\nlimits:\n  max_turns: 3\n"},
		{"unknown-field-near", "limits:\n  max_turn: 3\n"},
		{"unknown-field-camel", "model:\n  name: m\n  baseURL: http://127.0.0.1:11434/v1\n"},
		{"unknown-field-far", "limits:\n  colour: blue\n"},
		{"wrong-type", "limits:\n  max_turns: many\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "kernel.yaml")
			if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := cli(t, "config", "show", "--config", p)
			if err == nil {
				t.Fatal("the configuration loaded")
			}
			golden(t, "messages/config-"+tc.name+".golden", normalize(err.Error(), map[string]string{dir: "DIR"})+"\n")
		})
	}
}

// TestMessagesModel404: a model server's 404 names the URL the request
// went to, and asks about /v1 when the base URL has no version in its
// path (Ollama's answer to a base URL without /v1 is a bare "404 page not
// found"); with /v1 there it is the model that is missing.
func TestMessagesModel404(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":{"message":"model \"qwen9\" not found, try pulling it first","type":"api_error"}}`)
			return
		}
		http.NotFound(w, r) // Go's "404 page not found", as Ollama sends
	}))
	defer srv.Close()
	for _, tc := range []struct{ name, base string }{
		{"no-v1", srv.URL},
		{"model-missing", srv.URL + "/v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := cli(t, "run", "--base-url", tc.base, "--model", "qwen9", "--store", t.TempDir(), "--workspace", t.TempDir(), "hi")
			if err == nil {
				t.Fatal("the run succeeded")
			}
			golden(t, "messages/model-404-"+tc.name+".golden", normalize(err.Error(), nil)+"\n")
		})
	}
}

// TestMessagesMCPList: `kernel mcp ls` lists every configured server with
// its state: one that works with its tools, one whose header names an
// unset variable (its name shown: a variable's name is no secret, and the
// scrubber must not eat it), one whose grant names a directory that does
// not exist (named at the user's own line, not as an index of the grant
// the kernel builds); the exit status says that two do not work.
func TestMessagesMCPList(t *testing.T) {
	dir := plainTempDir(t)
	os.Unsetenv("AK_TEST_DOCS_TOKEN")
	cfg := "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: ws\n" +
		"tools:\n  mcp:\n" +
		"    - name: t\n      command: [" + mcptest.Server(t) + "]\n" +
		"      tiers: {echo: read_only}\n" +
		"    - name: docs\n      url: http://127.0.0.1:9/mcp\n" +
		"      headers: {Authorization: 'Bearer ${env:AK_TEST_DOCS_TOKEN}'}\n" +
		"    - name: uv\n      command: [" + mcptest.Server(t) + "]\n" +
		"      grant:\n        fs:\n          - {path: ~/.cache/uv-absent, mode: rw}\n"
	writeFiles(t, dir, map[string]string{"kernel.yaml": cfg, "script.yaml": "turns: [{text: x}]\n", "ws/a.txt": "a\n"})
	t.Setenv("HOME", filepath.Join(dir, "home"))
	out, errOut, err := cli(t, "mcp", "ls", "--config", filepath.Join(dir, "kernel.yaml"))
	code, msg := exitStatus(err)
	got := normalize("stdout:\n"+out+"stderr:\n"+errOut+"exit "+strconv.Itoa(code)+": "+msg+"\n",
		map[string]string{mcptest.Server(t): "MCPTESTSERVER", dir: "DIR"})
	golden(t, "messages/mcp-ls.golden", got)
	if !strings.Contains(got, "AK_TEST_DOCS_TOKEN") || strings.Contains(got, "REDACTED") {
		t.Errorf("the variable's name did not survive:\n%s", got)
	}
}

// TestMessagesInit: `kernel init` says what to run next: the offline
// first run with the script it wrote (no model, no key), then a real
// model. The offline run works with init's configuration as written,
// labelled scripted and priced at nothing, though the file names
// gpt-4o-mini.
func TestMessagesInit(t *testing.T) {
	dir := t.TempDir()
	ws, conf := filepath.Join(dir, "project"), filepath.Join(dir, "agent")
	writeFiles(t, ws, map[string]string{"README.md": "# project\n", "main.go": "package main\n"})
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	out, errOut, err := cli(t, "init", "--dir", conf, "--workspace", ws)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	dirs := map[string]string{dir: "DIR"}
	golden(t, "messages/init.golden", normalize("stdout:\n"+out+"stderr:\n"+errOut, dirs))

	// The offline run, as printed under "next:".
	m := regexp.MustCompile(`(?m)^\s+kernel (run .*--script \S+) "([^"]+)"$`).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("init printed no offline run:\n%s", errOut)
	}
	args := append(strings.Fields(m[1]), m[2])
	out, errOut, err = cli(t, args...)
	if err != nil {
		t.Fatalf("the offline first run: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "· model scripted") || !strings.Contains(errOut, "✓ list_dir") || !strings.Contains(out, "no model was called") {
		t.Errorf("the offline first run:\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
	sessions, _, err := cli(t, "sessions", "ls", "--config", filepath.Join(conf, "kernel.yaml"), "--json")
	if err != nil || !strings.Contains(sessions, `"model": "scripted"`) || !strings.Contains(sessions, `"cost_usd": 0`) {
		t.Errorf("the session is not labelled scripted at no cost (%v):\n%s", err, sessions)
	}
}

// TestMessagesApprovalRecord: `kernel sessions show` says who approved or
// rejected a call and with what note; an approval through the CLI records
// who ran it (its `by`, in the export too).
func TestMessagesApprovalRecord(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"ws/README.md": "# ws\n",
		"policy.yaml": "name: ask-writes\nrevision: \"1\"\ndefaults: {tool_call: allow}\nrules:\n" +
			"  - {id: ask-writes, effect: ask, tools: [write_file], when: 'true', message: '\"write \" + call.args.path'}\n" +
			"tests:\n  - {name: a write asks, input: {call: {tool: write_file, args: {path: a, content: b}}}, expect: {decision: ask, rules: [ask-writes]}}\n",
		"script.yaml": "turns:\n  - tool_calls: [{name: write_file, args: {path: NOTES.md, content: \"notes\\n\"}}]\n  - text: done\n",
		"kernel.yaml": "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: ws\nstore: {dir: store}\npolicy: {file: policy.yaml}\n" +
			"tools: {builtin: {enable: [read_file, write_file]}}\n",
	})
	cfg := filepath.Join(dir, "kernel.yaml")
	var shown []string
	for _, approve := range []bool{true, false} {
		if _, errOut, err := cli(t, "run", "--config", cfg, "Write NOTES.md"); err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		ls, _, err := cli(t, "sessions", "ls", "--config", cfg)
		if err != nil {
			t.Fatal(err)
		}
		sid := strings.Fields(strings.Split(ls, "\n")[1])[0]
		verb, note := "reject", "not in this project"
		if approve {
			verb, note = "approve", "looks right"
		}
		if _, errOut, err := cli(t, verb, "--config", cfg, "--yes", "--note", note, sid); err != nil {
			t.Fatalf("%s: %v\n%s", verb, err, errOut)
		}
		out, _, err := cli(t, "sessions", "show", "--config", cfg, sid)
		if err != nil {
			t.Fatal(err)
		}
		shown = append(shown, out)
		export, _, err := cli(t, "sessions", "export", "--config", cfg, sid)
		if err != nil || !strings.Contains(export, `"by":"`+cliPrincipal()+`"`) {
			t.Errorf("the export does not say who decided (%v):\n%s", err, export)
		}
	}
	golden(t, "messages/sessions-show-approval.golden", normalize(strings.Join(shown, "----\n"), map[string]string{dir: "DIR"}))
}

// plainTempDir is a temporary directory whose name the credential
// scrubber leaves alone: t.TempDir's (TestMessagesMCPList3954710285)
// reads as a high-entropy token to it, and this test's message goes
// through the scrubber.
func plainTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ak-msg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
