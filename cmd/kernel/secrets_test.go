package main

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
)

// exportSession is `kernel sessions export` of the only session in store.
func exportSession(t *testing.T, store string) string {
	t.Helper()
	ls, _, err := cli(t, "sessions", "ls", "--store", store)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(ls), "\n")
	if len(lines) < 2 {
		t.Fatalf("no session in %s:\n%s", store, ls)
	}
	out, errOut, err := cli(t, "sessions", "export", "--store", store, strings.Fields(lines[1])[0])
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	return out
}

// TestKeyEchoedByProxy: a proxy answers 401 and echoes the key it was
// sent. The key appears nowhere the kernel writes (stderr, the events
// file, the session), and the kernel's own words stay whole.
func TestKeyEchoedByProxy(t *testing.T) {
	const key = "gw-Kp3xQ9rT2vN8mZ4w" // in no format a detector knows
	body, err := os.ReadFile("../../kernel/provider/openai/testdata/proxy_401_echo_key.json")
	if err != nil {
		t.Fatal(err)
	}
	srv := openaitest.NewServer(t, openaitest.Step{Status: http.StatusUnauthorized, Body: string(body)})
	t.Setenv("AGENTKERNEL_TEST_PROXY_KEY", key)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	store := t.TempDir()
	_, errOut, err := cli(t, "run", "--provider", "openai", "--base-url", srv.URL(), "--api-key-env", "AGENTKERNEL_TEST_PROXY_KEY",
		"--model", "gpt-test", "--workspace", "../../examples/demo/workspace", "--store", store, "--events", events, "hi")
	if err == nil {
		t.Fatal("the run succeeded against a 401")
	}
	if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer "+key {
		t.Fatalf("the proxy got %q", got)
	}
	ev, _ := os.ReadFile(events)
	printed := errOut + "\n" + scrubError(err).Error()
	for where, text := range map[string]string{"stderr": printed, "events": string(ev), "session": exportSession(t, store)} {
		if strings.Contains(text, key) {
			t.Errorf("the key is in the %s:\n%s", where, text)
		}
	}
	for _, want := range []string{"auth; retrying will not help", "Incorrect API key provided: [REDACTED]. You can find your API key"} {
		if !strings.Contains(printed, want) {
			t.Errorf("stderr lacks %q:\n%s", want, printed)
		}
	}
}

// TestHeldKeyInToolResults: the key the kernel holds, read from a file by
// a tool, reaches neither the model, nor the events, nor the session.
func TestHeldKeyInToolResults(t *testing.T) {
	const key = "gw-Zb6nW1sY5cH0qL7j"
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("deploy with "+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := openaitest.NewServer(t, openaitest.ToolCall("read_file", `{"path":"notes.txt"}`), openaitest.Text("Noted."))
	t.Setenv("AGENTKERNEL_TEST_HELD_KEY", key)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	store := t.TempDir()
	_, errOut, err := cli(t, "run", "--provider", "openai", "--base-url", srv.URL(), "--api-key-env", "AGENTKERNEL_TEST_HELD_KEY",
		"--model", "gpt-test", "--workspace", ws, "--store", store, "--events", events, "read notes.txt")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	second := string(srv.Requests()[1].Body)
	if !strings.Contains(second, "deploy with [REDACTED]") {
		t.Fatalf("the result did not reach the model redacted: %s", second)
	}
	ev, _ := os.ReadFile(events)
	for where, text := range map[string]string{"model": second, "stderr": errOut, "events": string(ev), "session": exportSession(t, store)} {
		if strings.Contains(text, key) {
			t.Errorf("the key is in the %s:\n%s", where, text)
		}
	}
}

// TestKernelWordingIsNotASecret: the CLI's scrubber leaves the kernel's
// own error wording whole for every cause.
func TestKernelWordingIsNotASecret(t *testing.T) {
	for _, pe := range []*kernel.ProviderError{
		{Provider: "openai", StatusCode: 401, Code: "invalid_api_key", Message: "Incorrect API key provided."},
		{Provider: "openai", StatusCode: 401, Code: "authentication_error", Message: "Invalid bearer token."},
		{Provider: "openai", StatusCode: 403, Code: "permission_denied", Message: "Project does not have access."},
		{Provider: "openai", StatusCode: 400, Code: kernel.CodeToolsUnsupported, Message: "gemma3:4b does not support tools"},
		{Provider: "openai", Code: "stream_cut", Message: "the connection closed after 3 events"},
	} {
		for _, cause := range []string{"auth", "quota", "context_length", "model_missing", "400", "malformed_chunk", kernel.CodeToolsUnsupported} {
			err := error(&kernel.ModelCallError{Attempts: 1, Cause: cause, Err: pe})
			if got := scrubError(err).Error(); got != err.Error() || !errors.As(scrubError(err), new(*kernel.ProviderError)) {
				t.Errorf("scrubbed:\n%s\nwas:\n%s", got, err)
			}
		}
	}
}
