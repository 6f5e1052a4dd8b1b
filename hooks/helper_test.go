package hooks

import (
	"github.com/agentkernel/agentkernel/sandbox"

	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMain lets the test binary act as a command hook (for what a shell
// script cannot do cleanly): run as "<test binary> hookhelper <mode>" it
// plays one of the modes below instead of running the tests.
func TestMain(m *testing.M) {
	sandbox.Main()
	if len(os.Args) > 2 && os.Args[1] == "hookhelper" {
		os.Exit(hookHelper(os.Args[2], os.Args[3:]))
	}
	os.Exit(m.Run())
}

func hookHelper(mode string, args []string) int {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch mode {
	case "env": // report the environment to the model
		env := os.Environ()
		slices.Sort(env)
		out, _ := json.Marshal(Output{Decision: "allow", AdditionalContext: "env=" + strings.Join(env, ";")})
		os.Stdout.Write(out)
	case "input": // echo the input document back as the note
		out, _ := json.Marshal(Output{Decision: "allow", AdditionalContext: strings.TrimSpace(string(in))})
		os.Stdout.Write(out)
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 1
	}
	return 0
}

// helperArgv is the argv of a command hook played by the test binary.
func helperArgv(t testing.TB, mode string, args ...string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{exe, "hookhelper", mode}, args...)
}

// shellHook writes a /bin/sh command hook with the given body and returns
// its path. Shell hooks start in about a millisecond, the test binary (under
// the race detector) in about a second.
func shellHook(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hook.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// yamlList renders argv as a YAML flow list.
func yamlList(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		b, _ := json.Marshal(a)
		quoted[i] = string(b)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}
