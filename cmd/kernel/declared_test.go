package main

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentkernel/agentkernel/kernel"
)

// declaredSetup writes a workspace, a script and a kernel.yaml whose
// tools are extra (a tools: section's body) and returns the config's path.
func declaredSetup(t *testing.T, script, extra string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	all := map[string]string{
		"ws/README.md": "a workspace\n",
		"script.yaml":  script,
		"kernel.yaml": "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: ws\n" +
			"tools:\n  builtin: {enable: [read_file]}\n" + extra,
	}
	for k, v := range files {
		all[k] = v
	}
	writeFiles(t, dir, all)
	_ = ws
	return filepath.Join(dir, "kernel.yaml")
}

// TestDeclaredSecretNowhere: a header secret of a declared HTTP tool is
// sent to the server, which echoes it in an answer and in an error, and a
// built-in tool reads it from a file; it appears in none of the events, the stored session, its export, the
// OpenTelemetry content capture, the errors, or the pending approval the
// inbox shows.
func TestDeclaredSecretNowhere(t *testing.T) {
	const secret = "sk-decl-Q7v2Lm9XwP4t"
	var (
		mu  sync.Mutex // the tool calls of a turn run in parallel
		got []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		if r.URL.Query().Get("q") == "fail" {
			w.WriteHeader(http.StatusForbidden)
		}
		io.WriteString(w, "token seen: "+r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	t.Setenv("DECL_TEST_TOKEN", secret)
	tools := `  http:
    - name: lookup
      description: Look a thing up.
      url: "` + srv.URL + `/things?q={q}"
      headers: {Authorization: "Bearer ${env:DECL_TEST_TOKEN}"}
      egress: {networks: [127.0.0.1/32]}
      args: {type: object, required: [q], properties: {q: {type: string}}}
    - name: post_note
      description: Post a note.
      method: POST
      url: "` + srv.URL + `/notes"
      headers: {Authorization: "Bearer ${env:DECL_TEST_TOKEN}"}
      egress: {networks: [127.0.0.1/32]}
      args: {type: object, required: [text], properties: {text: {type: string}}}
telemetry: {content: true}
policy: {file: policy.yaml}
`
	script := "steps:\n" +
		"  - tool_calls: [{name: lookup, args: {q: a}}, {name: lookup, args: {q: fail}}, {name: read_file, args: {path: notes.txt}}]\n" +
		"  - tool_calls: [{name: post_note, args: {text: hello}}]\n" +
		"  - text: done\n"
	cfg := declaredSetup(t, script, tools, map[string]string{"policy.yaml": "name: p\nrevision: \"1\"\ndefaults: {tool_call: allow}\nrules:\n" +
		"  - {id: ask-notes, effect: ask, tools: [post_note], when: 'true', message: '\"a note goes out\"'}\n" +
		"tests:\n  - {name: notes ask, input: {call: {tool: post_note, args: {text: x}}}, expect: {decision: ask}}\n",
		// Another tool reads the secret: the kernel holds it like the
		// model's API key, so every scrubber redacts it.
		"ws/notes.txt": "deploy token " + secret + "\n"})
	store := t.TempDir()
	events := filepath.Join(t.TempDir(), "events.jsonl")
	exp := tracetest.NewInMemoryExporter()
	out, errOut, err := cliSpans(t, exp, "run", "--config", cfg, "--store", store, "--events", events, "look it up")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	mu.Lock()
	seen := slices.Clone(got)
	mu.Unlock()
	if len(seen) != 2 || seen[0] != "Bearer "+secret {
		t.Fatalf("the server got %q", seen)
	}
	if !strings.Contains(errOut, "awaiting approval") && !strings.Contains(errOut, "awaiting_approval") {
		t.Fatalf("the run did not stop for the approval:\n%s", errOut)
	}
	ev, _ := os.ReadFile(events)
	sid := sessionLine.FindStringSubmatch(errOut)[1]
	show, _, err := cli(t, "sessions", "show", "--full", "--store", store, sid)
	if err != nil {
		t.Fatal(err)
	}
	var spans strings.Builder
	for _, s := range exp.GetSpans() {
		for _, kv := range s.Attributes {
			spans.WriteString(string(kv.Key) + "=" + kv.Value.Emit() + "\n")
		}
	}
	if !strings.Contains(spans.String(), "token seen: Bearer [REDACTED]") {
		t.Errorf("the content capture does not hold the redacted result:\n%s", spans.String())
	}
	for where, text := range map[string]string{"stdout": out, "stderr": errOut, "events": string(ev), "session (and its pending approval)": show,
		"export": exportSession(t, store), "spans": spans.String()} {
		if strings.Contains(text, secret) {
			t.Errorf("the secret is in the %s:\n%s", where, text)
		}
	}
	if !strings.Contains(string(ev), "token seen: Bearer [REDACTED]") || !strings.Contains(string(ev), "HTTP 403 Forbidden") {
		t.Errorf("the events do not show the redacted answer and the error:\n%s", ev)
	}
	if !strings.Contains(show, "deploy token [REDACTED]") {
		t.Errorf("read_file's result is not redacted in the session:\n%s", show)
	}
	if !strings.Contains(show, "post_note") {
		t.Errorf("the pending approval is not in the session:\n%s", show)
	}
}

// TestDeclaredToolsListAndReload: `kernel tools` lists declared tools with
// their source and grant; editing kernel.yaml under a running kernel adds,
// changes and removes them, and a broken edit keeps the running ones.
func TestDeclaredToolsListAndReload(t *testing.T) {
	cfg := declaredSetup(t, "steps: [{text: hi}]\n", `  inline:
    - {name: freeze, description: Deploy freeze., text: "frozen"}
  http:
    - {name: status, description: Service status., url: "https://status.example.com/api/v2/status.json"}
`, nil)
	out, errOut, err := cli(t, "tools", "--config", cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	for _, want := range []string{"freeze", "inline", "status", "http", "egress: status.example.com"} {
		if !strings.Contains(out, want) {
			t.Errorf("kernel tools lacks %q:\n%s", want, out)
		}
	}

	c, err := loadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(t.Context(), c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	wait := watchReloads(t, a)
	rewrite := func(body string) {
		b, _ := os.ReadFile(cfg)
		head := string(b)[:strings.Index(string(b), "  inline:")]
		tmp := cfg + ".tmp"
		os.WriteFile(tmp, []byte(head+body), 0o600)
		if err := os.Rename(tmp, cfg); err != nil {
			t.Fatal(err)
		}
	}
	nextTools := func() kernel.ConfigReloaded {
		for {
			if r := wait(); r.What == "tools" {
				return r
			}
		}
	}
	rewrite("  inline:\n    - {name: freeze, description: Deploy freeze., text: \"thawed\"}\n    - {name: oncall, description: Who is on call., text: \"ana\"}\n")
	if r := nextTools(); r.Error != "" {
		t.Fatalf("reload: %+v", r)
	}
	if _, ok := a.tools.Spec("status"); ok {
		t.Error("the removed http tool is still registered")
	}
	fz, _ := a.tools.Lookup("freeze")
	if res, _ := fz.Call(t.Context(), nil); res.Content != "thawed" {
		t.Errorf("the changed tool answers %q", res.Content)
	}
	if _, ok := a.tools.Spec("oncall"); !ok {
		t.Error("the added tool is not registered")
	}
	rewrite("  inline:\n    - {name: freeze, description: Deploy freeze., text: \"{nope}\"}\n")
	if r := nextTools(); !strings.Contains(r.Error, "{nope} names an argument") {
		t.Fatalf("broken reload: %+v", r)
	}
	if _, ok := a.tools.Spec("oncall"); !ok {
		t.Error("a broken reload removed the running tools")
	}
}

// TestToolsImportOpenAPI: `kernel tools import openapi` adds the Petstore's
// operations to kernel.yaml (a dry run first, which writes nothing), says
// which variables to export, and the imported tools run through the
// kernel against a local emulation; `kernel tools` shows their source.
func TestToolsImportOpenAPI(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("api_key"))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id": 7, "name": "Rex", "status": "available"}`)
	}))
	defer srv.Close()
	cfg := declaredSetup(t, "steps:\n  - tool_calls: [{name: petstore3.getPetById, args: {petId: 7}}]\n  - text: done\n", "", nil)
	before, _ := os.ReadFile(cfg)
	spec := "../../plugins/declared/openapi/testdata/petstore3.yaml"
	args := []string{"tools", "import", "openapi", spec, "--operations", "getPetById,addPet", "--operations", "findPetsByStatus",
		"--server", srv.URL + "/api/v3", "--networks", "127.0.0.1/32", "--write", cfg}
	out, errOut, err := cli(t, append(args, "--dry-run")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if after, _ := os.ReadFile(cfg); string(after) != string(before) || !strings.Contains(out, "name: petstore3.getPetById") || !strings.Contains(errOut, "--dry-run") {
		t.Fatalf("the dry run:\n%s\n%s", out, errOut)
	}
	_, errOut, err = cli(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	for _, want := range []string{"3 tools from petstore3.yaml (OpenAPI 3.0.4", "export PETSTORE3_API_KEY=", "export PETSTORE3_PETSTORE_AUTH="} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the import does not say %q:\n%s", want, errOut)
		}
	}
	// Without the variables the tools are refused at load, naming them.
	if _, errOut, err := cli(t, "tools", "--config", cfg); err == nil || !strings.Contains(errOut+err.Error(), "is not set: export it before starting the kernel") {
		t.Errorf("tools without the variables: %v\n%s", err, errOut)
	}
	t.Setenv("PETSTORE3_API_KEY", "pk-live-1234567")
	t.Setenv("PETSTORE3_PETSTORE_AUTH", "oauth-live-1234567")
	out, errOut, err = cli(t, "tools", "--config", cfg)
	if err != nil || strings.Count(out, "openapi:petstore3.yaml") != 3 {
		t.Fatalf("kernel tools: %v\n%s\n%s", err, out, errOut)
	}
	_, errOut, err = cli(t, "run", "--config", cfg, "--store", t.TempDir(), "find pet 7")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if len(got) != 1 || got[0] != "GET /api/v3/pet/7 pk-live-1234567" {
		t.Errorf("the emulation got %q", got)
	}
}

// TestDeclaredCommandCannotGrantKernelFiles: a command tool whose sandbox
// would let it write the kernel's own files is refused, like run_command's.
func TestDeclaredCommandCannotGrantKernelFiles(t *testing.T) {
	cfg := declaredSetup(t, "steps: [{text: hi}]\n", "  command:\n    - {name: c, description: d, argv: [\"true\"], sandbox: {fs: [{path: ., mode: rw}]}}\n", nil)
	_, errOut, err := cli(t, "run", "--config", cfg, "--store", t.TempDir(), "hi")
	if err == nil || !strings.Contains(errOut+err.Error(), "command tool c's sandbox grant") {
		t.Errorf("a command tool granted the config's directory: %v\n%s", err, errOut)
	}
}

// TestDeclaredCommandWritesTheWorkspace: a command tool writes the
// workspace (its default grant is run_command's), so with no built-in
// write tool enabled a policy inside the workspace is still a kernel file
// a tool could change: the start is refused, naming the command tool.
// Without the command tools' workspace among the writable areas this
// starts, and the model rewrites its own policy through the tool.
func TestDeclaredCommandWritesTheWorkspace(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"ws/policy.yaml": "name: p\nrevision: \"1\"\ndefaults:\n  tool_call: allow\n",
		"script.yaml":    "steps: [{text: hi}]\n",
		"kernel.yaml": "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: ws\npolicy: {file: ws/policy.yaml}\n" +
			"tools:\n  builtin: {enable: [read_file]}\n  command:\n    - {name: c, description: d, argv: [\"true\"]}\n",
	})
	_, errOut, err := cli(t, "run", "--config", filepath.Join(dir, "kernel.yaml"), "--store", t.TempDir(), "hi")
	if !errors.Is(err, ErrProtectedWritable) {
		t.Fatalf("started with its policy in the workspace command tool c writes: %v\n%s", err, errOut)
	}
	for _, want := range []string{"the policy " + filepath.Join(dir, "ws", "policy.yaml"), "command tool c"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q:\n%v", want, err)
		}
	}
}

// TestDeclaredCommandScriptIsAKernelFile: a command tool that runs a
// script the workspace holds ([sh, ws/tool.sh, "{x}"]) runs what
// write_file can rewrite, with the command tool's grant: the start is
// refused naming the script. The same script outside every writable
// directory starts; a placeholder the model fills in is its own. Without
// the command tools' argv among the kernel files this starts.
func TestDeclaredCommandScriptIsAKernelFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"ws/tool.sh":  "echo $1\n",
		"bin/tool.sh": "echo $1\n",
		"script.yaml": "steps: [{text: hi}]\n",
	})
	for _, tc := range []struct {
		script  string
		refused bool
	}{{"ws/tool.sh", true}, {"bin/tool.sh", false}} {
		conf := filepath.Join(dir, "kernel.yaml")
		writeFiles(t, dir, map[string]string{"kernel.yaml": "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: ws\n" +
			"tools:\n  builtin: {enable: [read_file, write_file]}\n  command:\n" +
			"    - {name: c, description: d, argv: [sh, " + filepath.Join(dir, tc.script) + ", \"{x}\"], args: {type: object, properties: {x: {type: string}}}}\n"})
		_, errOut, err := cli(t, "run", "--config", conf, "--store", t.TempDir(), "hi")
		if !tc.refused {
			if err != nil {
				t.Errorf("%s: %v\n%s", tc.script, err, errOut)
			}
			continue
		}
		if !errors.Is(err, ErrProtectedWritable) {
			t.Fatalf("started with command tool c running %s, which write_file can change: %v\n%s", tc.script, err, errOut)
		}
		for _, want := range []string{"a file the argv of command tool c runs " + filepath.Join(dir, tc.script), "write_file"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal lacks %q:\n%v", want, err)
			}
		}
	}
}
