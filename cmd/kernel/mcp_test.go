package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentkernel/agentkernel/internal/mcptest"
)

const mcpPolicy = `name: mcp-test
revision: "1"
defaults:
  tool_call: allow
rules:
  - id: no-notes-about-secrets
    effect: deny
    tools: [t.write_note, write_file]
    when: 'string(call.args.title ?? call.args.path) contains "secret"'
    message: '"nothing about secrets is written"'
  - id: notes-need-approval
    effect: ask
    tools: [t.write_note]
    when: "true"
    message: '"store a note?"'
tests:
  - name: a note about secrets is denied
    input:
      call: {tool: t.write_note, args: {title: "my secret", body: x}}
    expect: {decision: deny, rules: [no-notes-about-secrets]}
  - name: a file about secrets is denied
    input:
      call: {tool: write_file, args: {path: "secret.txt", content: x}}
    expect: {decision: deny, rules: [no-notes-about-secrets]}
  - name: other notes need approval
    input:
      call: {tool: t.write_note, args: {title: "groceries", body: x}}
    expect: {decision: ask, rules: [notes-need-approval]}
`

// mcpSetup writes a workspace, a policy, a hook and a config whose tools
// include the MCP test server as "t", and returns the config path and the
// server's calls log.
func mcpSetup(t *testing.T, script string) (cfgPath, calls string) {
	t.Helper()
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "server"), 0o700) // the one directory the confined server may write
	calls = filepath.Join(dir, "server", "calls.log")
	os.MkdirAll(filepath.Join(dir, "ws"), 0o700)
	os.WriteFile(filepath.Join(dir, "ws", "creds.txt"), []byte("aws key: AKIA6PYCDYBK155OXTZ7\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(mcpPolicy), 0o600)
	os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(script), 0o600)
	cfg := "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: ws\npolicy: {file: policy.yaml}\n" +
		"hooks:\n  rules:\n    - name: canary\n      phase: after\n      match: 'true'\n      redact: ['CANARY-[0-9]+']\n" +
		"tools:\n  builtin: {enable: [read_file, write_file]}\n" +
		"  mcp:\n    - name: t\n      command: [" + mcptest.Server(t) + ", -broken-schemas, -calls, " + calls + "]\n" +
		"      grant: {fs: [{path: server, mode: rw}]}\n" +
		"      tiers: {echo: read_only}\n"
	cfgPath = filepath.Join(dir, "kernel.yaml")
	os.WriteFile(cfgPath, []byte(cfg), 0o600)
	return cfgPath, calls
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// MCP tools called by a (scripted) model through the CLI take the whole
// pipeline: a schema violation never reaches the server, a hook rewrites
// the result, a deny rule stops the call, as for the built-in beside them.
func TestMCPToolsThroughCLI(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	cfg, calls := mcpSetup(t, `steps:
  - tool_calls:
      - {name: t.echo, args: {text: "code CANARY-1234"}}
      - {name: t.echo, args: {text: 42}}
      - {name: t.write_note, args: {title: "my secret", body: "x"}}
      - {name: write_file, args: {path: "secret.txt", content: "x"}}
  - text: done
`)
	store := t.TempDir()
	_, errOut, err := cli(t, "run", "--config", cfg, "--store", store, "go")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	seen := readFile(calls)
	if !strings.Contains(seen, `call echo {"text":"code CANARY-1234"}`) {
		t.Errorf("the valid call did not reach the server:\n%s", seen)
	}
	if strings.Contains(seen, "42") || strings.Contains(seen, "write_note") {
		t.Errorf("an invalid or denied call reached the server:\n%s", seen)
	}
	for _, want := range []string{
		"t.echo: tool t.echo: invalid arguments: /text: expected string",
		"hook canary rewrote t.echo",
		"policy: deny t.write_note: nothing about secrets is written (rule no-notes-about-secrets)",
		"policy: deny write_file: nothing about secrets is written (rule no-notes-about-secrets)",
		`tool "huge" left out`, `tool "invalid" left out`,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	out, _, err := cli(t, "sessions", "show", "--full", "--store", store, sessionLine.FindStringSubmatch(errOut)[1])
	if err != nil {
		t.Fatal(err)
	}
	// The model's own arguments are stored as sent; the result is redacted.
	if !strings.Contains(out, "code [REDACTED]") || strings.Count(out, "CANARY-1234") != 1 {
		t.Errorf("the hook's redaction is not what was stored:\n%s", out)
	}
}

func TestMCPList(t *testing.T) {
	cfg, _ := mcpSetup(t, "steps: [{text: x}]\n")
	out, errOut, err := cli(t, "mcp", "ls", "--config", cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	for _, want := range []string{"t  ", "running", "stdio", "t.echo", "read_only", "hints: read_only", "t.write_note", "side_effecting", "hints: destructive", "huge", "LEFT OUT"} {
		if !strings.Contains(out, want) {
			t.Errorf("mcp ls lacks %q:\n%s", want, out)
		}
	}
	out, _, err = cli(t, "mcp", "ls", "--json", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var servers []struct {
		Name  string
		State string
		Tools []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(out), &servers); err != nil || len(servers) != 1 || len(servers[0].Tools) < 5 {
		t.Fatalf("mcp ls --json: %v\n%s", err, out)
	}
}

// serveStdio runs `kernel mcp serve` on pipes and connects the Go SDK's
// client to it. stop closes the client and waits for the command.
func serveStdio(t *testing.T, cfg, store string, opts *sdk.ClientOptions) (cs *sdk.ClientSession, stop func() string) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb ptyOutput
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"mcp", "serve", "--config", cfg, "--store", store}, inR, outW, &errb)
		outW.Close()
	}()
	client := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, errb.String())
	}
	return cs, func() string {
		cs.Close()
		inW.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("mcp serve: %v\n%s", err, errb.String())
			}
		case <-time.After(60 * time.Second):
			t.Fatal("mcp serve did not stop after the client left")
		}
		return errb.String()
	}
}

func callText(t *testing.T, cs *sdk.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

var idRE = regexp.MustCompile(`\b[0-9a-z]{16}\b`)

// The Go SDK's client uses `kernel mcp serve`: it lists the kernel's tools
// (built-ins and the proxied MCP server's), its calls take the pipeline
// (scrubber, deny rule, schema), and the connection is a stored session.
func TestMCPServeStdio(t *testing.T) {
	cfg, calls := mcpSetup(t, "steps: [{text: x}]\n")
	store := t.TempDir()
	cs, stop := serveStdio(t, cfg, store, nil)
	ctx := context.Background()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	for _, want := range []string{"read_file", "write_file", "t.echo", "t.write_note"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}
	text, isErr := callText(t, cs, "read_file", map[string]any{"path": "creds.txt"})
	if isErr || strings.Contains(text, "AKIA6PYCDYBK155OXTZ7") || !strings.Contains(text, "[REDACTED]") {
		t.Errorf("read_file of a planted secret: isError=%v %q", isErr, text)
	}
	text, isErr = callText(t, cs, "t.echo", map[string]any{"text": "proxied"})
	if isErr || text != "proxied" {
		t.Errorf("t.echo: isError=%v %q", isErr, text)
	}
	text, isErr = callText(t, cs, "write_file", map[string]any{"path": "secret.txt", "content": "x"})
	if !isErr || !strings.Contains(text, "no-notes-about-secrets") {
		t.Errorf("denied write_file: isError=%v %q, want an error naming the rule", isErr, text)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(cfg), "ws", "secret.txt")); err == nil {
		t.Error("the denied write happened")
	}
	text, isErr = callText(t, cs, "t.echo", map[string]any{"text": 7})
	if !isErr || !strings.Contains(text, "/text: expected string") {
		t.Errorf("schema violation: isError=%v %q", isErr, text)
	}
	// No elicitation support: an ask is denied with an approval id.
	text, isErr = callText(t, cs, "t.write_note", map[string]any{"title": "groceries", "body": "milk"})
	if !isErr || !strings.Contains(text, "kernel approve") {
		t.Errorf("ask without elicitation: isError=%v %q", isErr, text)
	}
	stop()
	if strings.Contains(readFile(calls), "write_note") || strings.Contains(readFile(calls), "7}") {
		t.Errorf("a denied, pending or invalid call reached the server:\n%s", readFile(calls))
	}
	out, _, err := cli(t, "sessions", "ls", "--store", store)
	if err != nil {
		t.Fatal(err)
	}
	id := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "mcp serve: test-client") {
			id = idRE.FindString(line)
		}
	}
	if id == "" {
		t.Fatalf("no session for the client:\n%s", out)
	}
	out, _, err = cli(t, "sessions", "show", "--full", "--store", store, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"read_file", "[REDACTED]", "t.echo", "denied by policy: nothing about secrets", "waiting for approval:\n    tool: t.write_note"} {
		if !strings.Contains(out, want) {
			t.Errorf("stored session lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "AKIA6PYCDYBK155OXTZ7") {
		t.Errorf("the secret was stored:\n%s", out)
	}
	// The pending approval resolves with `kernel approve`: the call runs
	// (reaching the server) and the session ends without a model.
	_, errOut, err := cli(t, "approve", "--yes", "--config", cfg, "--store", store, id)
	if err != nil {
		t.Fatalf("approve: %v\n%s", err, errOut)
	}
	if !strings.Contains(readFile(calls), `call write_note {"body":"milk","title":"groceries"}`) {
		t.Errorf("the approved call did not run:\n%s\n%s", readFile(calls), errOut)
	}
}

// appendFile adds text to the end of the file at path.
func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// With mcp_serve.approvals: elicitation, an ask goes to the client's user.
func TestMCPServeElicitation(t *testing.T) {
	cfg, calls := mcpSetup(t, "steps: [{text: x}]\n")
	appendFile(t, cfg, "mcp_serve: {approvals: elicitation}\n")
	var asked []string
	var mu sync.Mutex
	cs, stop := serveStdio(t, cfg, t.TempDir(), &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params.Message)
			n := len(asked)
			mu.Unlock()
			if n == 1 {
				return &sdk.ElicitResult{Action: "accept"}, nil
			}
			return &sdk.ElicitResult{Action: "decline"}, nil
		},
	})
	defer stop()
	text, isErr := callText(t, cs, "t.write_note", map[string]any{"title": "groceries", "body": "milk"})
	if isErr || !strings.Contains(text, "stored note") {
		t.Errorf("accepted: isError=%v %q", isErr, text)
	}
	text, isErr = callText(t, cs, "t.write_note", map[string]any{"title": "chores", "body": "none"})
	if !isErr || !strings.Contains(text, "rejected") {
		t.Errorf("declined: isError=%v %q", isErr, text)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || !strings.Contains(asked[0], "notes-need-approval") {
		t.Errorf("elicitations: %q", asked)
	}
	if seen := readFile(calls); !strings.Contains(seen, "groceries") || strings.Contains(seen, "chores") {
		t.Errorf("calls that reached the server:\n%s", seen)
	}
}

// TestMCPServeClientCannotApproveItself is issue 25's attack: a client
// that declares elicitation and accepts every request approved its own
// asks. By default (mcp_serve.approvals: kernel) the client is never asked:
// the call waits in the session for `kernel approve`, and never reaches the
// server. Under "elicitation", a client without elicitation gets the ask
// rejected; under "both" it is left pending.
func TestMCPServeClientCannotApproveItself(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	selfApprover := func(asked *atomic.Int32) *sdk.ClientOptions {
		return &sdk.ClientOptions{ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			asked.Add(1)
			return &sdk.ElicitResult{Action: "accept"}, nil
		}}
	}
	for _, tc := range []struct {
		name, config string
		elicit       bool
		want         string
	}{
		{"default", "", true, "kernel approve"},
		{"kernel", "mcp_serve: {approvals: kernel}\n", true, "kernel approve"},
		{"elicitation without the capability", "mcp_serve: {approvals: elicitation}\n", false, "rejected"},
		{"both without the capability", "mcp_serve: {approvals: both}\n", false, "kernel approve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, calls := mcpSetup(t, "steps: [{text: x}]\n")
			appendFile(t, cfg, tc.config)
			var asked atomic.Int32
			var opts *sdk.ClientOptions
			if tc.elicit {
				opts = selfApprover(&asked)
			}
			cs, stop := serveStdio(t, cfg, t.TempDir(), opts)
			text, isErr := callText(t, cs, "t.write_note", map[string]any{"title": "groceries", "body": "milk"})
			stop()
			if !isErr || !strings.Contains(text, tc.want) {
				t.Errorf("ask: isError=%v %q, want an error containing %q", isErr, text, tc.want)
			}
			if n := asked.Load(); n != 0 {
				t.Errorf("the client was asked %d times to approve its own call", n)
			}
			if strings.Contains(readFile(calls), "write_note") {
				t.Errorf("the call reached the server without the operator's approval:\n%s", readFile(calls))
			}
		})
	}
}

// Over streamable HTTP the bearer token is required.
func TestMCPServeHTTP(t *testing.T) {
	cfg, _ := mcpSetup(t, "steps: [{text: x}]\n")
	t.Setenv("KERNEL_MCP_TOKEN", "tok-123")
	t.Setenv("KERNEL_LOG", "info") // the session table's size is logged
	ctx, cancel := context.WithCancel(context.Background())
	var errb ptyOutput
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"mcp", "serve", "--http", "127.0.0.1:0", "--config", cfg, "--store", t.TempDir()}, strings.NewReader(""), io.Discard, &errb)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mcp serve: %v\n%s", err, errb.String())
		}
	}()
	urlRE := regexp.MustCompile(`listening on (http://\S+)`)
	mcptest.WaitFor(t, "mcp serve to listen", func() bool { return urlRE.MatchString(errb.String()) })
	url := urlRE.FindStringSubmatch(errb.String())[1]

	resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %s", resp.Status)
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "http-client", Version: "1"}, nil)
	hc := &http.Client{Transport: bearer{"tok-123"}}
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	text, isErr := callText(t, cs, "t.echo", map[string]any{"text": "via http"})
	if isErr || text != "via http" {
		t.Errorf("t.echo over HTTP: isError=%v %q", isErr, text)
	}

	// Sessions that end are forgotten: after three more clients have
	// connected, called and closed, only the first one is open.
	for i := range 3 {
		c, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if text, _ := callText(t, c, "t.echo", map[string]any{"text": "again"}); text != "again" {
			t.Errorf("client %d: %q", i, text)
		}
		c.Close()
	}
	mcptest.WaitFor(t, "the ended sessions to be forgotten", func() bool {
		return strings.Count(errb.String(), "client session ended") == 3 && strings.Contains(errb.String(), "open=1")
	})
}

type bearer struct{ tok string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// TestSandboxCheckListsMCPServers: `kernel sandbox check` shows the grant
// an MCP stdio server runs under, beside run_command's.
func TestSandboxCheckListsMCPServers(t *testing.T) {
	cfg, _ := mcpSetup(t, "steps: [{text: x}]\n")
	out, errOut, err := cli(t, "sandbox", "check", "--config", cfg, "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var rep struct {
		Tools []sandboxToolReport `json:"tools"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got []string
	for _, tr := range rep.Tools {
		got = append(got, tr.Tool)
		if tr.Tool == "mcp server t" {
			if !strings.Contains(tr.Grant, filepath.Join(filepath.Dir(cfg), "server")+":rw") || !strings.Contains(tr.Grant, "net none") {
				t.Errorf("the server's grant is %q", tr.Grant)
			}
			return
		}
	}
	t.Fatalf("no MCP server among %v", got)
}
