package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
)

// writeFiles writes name → body under dir and returns dir.
func writeFiles(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestBuiltinEnableEmpty: "tools.builtin.enable: []" in kernel.yaml turns
// every built-in off, run_command included; the embedded default (the key
// omitted) stays the three read-only tools.
func TestBuiltinEnableEmpty(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"none.yaml":    "workspace: ws\ntools:\n  builtin:\n    enable: []\n",
		"default.yaml": "workspace: ws\n",
		"ws/a.txt":     "a\n",
	})
	out, errOut, err := cli(t, "tools", "--config", filepath.Join(dir, "none.yaml"), "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if strings.Contains(out, `"name"`) {
		t.Fatalf("enable: [] still offers tools:\n%s", out)
	}
	out, errOut, err = cli(t, "tools", "--config", filepath.Join(dir, "default.yaml"), "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	for _, n := range []string{"read_file", "list_dir", "search"} {
		if !strings.Contains(out, `"name": "`+n+`"`) {
			t.Fatalf("default lacks %s:\n%s", n, out)
		}
	}
	if strings.Contains(out, "run_command") || strings.Contains(out, "write_file") {
		t.Fatalf("default offers a write tool:\n%s", out)
	}
}

// fakeKey is shaped like an OpenAI project key; it is random, not real.
const fakeKey = "sk-proj-Qm7vT2xLp9RkW4nZc8YhJ3bFd6GsA1eU5oNiXy0VtKqMwP"

// TestProviderErrorScrubbed: a model server that echoes the key in its
// error body does not get it printed, returned or written to the events.
func TestProviderErrorScrubbed(t *testing.T) {
	srv := openaitest.NewServer(t, openaitest.Error(401, "Incorrect API key provided: "+fakeKey+". You can find your API key at https://example.invalid."))
	t.Setenv("AGENTKERNEL_TEST_KEY", fakeKey)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	out, errOut, err := cli(t, "run", "--provider", "openai", "--base-url", srv.URL(), "--api-key-env", "AGENTKERNEL_TEST_KEY",
		"--model", "gpt-test", "--workspace", "../../examples/demo/workspace", "--store", t.TempDir(), "--events", events, "hi")
	if err == nil {
		t.Fatal("the run succeeded against a 401")
	}
	ev, rerr := os.ReadFile(events)
	if rerr != nil {
		t.Fatal(rerr)
	}
	for what, s := range map[string]string{"error": err.Error(), "stdout": out, "stderr": errOut, "events": string(ev)} {
		if strings.Contains(s, fakeKey) || strings.Contains(s, fakeKey[8:30]) {
			t.Errorf("%s carries the key:\n%s", what, s)
		}
	}
	if !strings.Contains(string(ev), "run.failed") || !strings.Contains(err.Error(), "[REDACTED") {
		t.Fatalf("error %q, events:\n%s", err, ev)
	}
	if fi, err := os.Stat(events); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("events file mode %v, %v; want 0600", fi.Mode(), err)
	}
}

// TestAPIKeyFlagNotEchoed: a key passed by mistake to --api-key-env is
// refused without being echoed.
func TestAPIKeyFlagNotEchoed(t *testing.T) {
	_, errOut, err := cli(t, "run", "--provider", "openai", "--api-key-env", fakeKey, "--store", t.TempDir(), "hi")
	if err == nil {
		t.Fatal("accepted a key as a variable name")
	}
	if strings.Contains(err.Error()+errOut, fakeKey[3:20]) {
		t.Fatalf("the key was echoed: %v\n%s", err, errOut)
	}
	if !strings.Contains(err.Error(), "--api-key-env") {
		t.Fatalf("error does not name the flag: %v", err)
	}
}
