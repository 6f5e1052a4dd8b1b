package declared_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/plugins/builtin"
	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/tool"
)

// TestCommandInjection: an argument of "; rm -rf /" is one argv entry of
// the program, never a shell's input; the program runs confined (it
// cannot write outside the workspace); a value that would be read as an
// option is refused.
func TestCommandInjection(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	canary := filepath.Join(outside, "canary")
	if err := os.WriteFile(canary, []byte("still here"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := options(nil, nil)
	o.Workspace = ws
	o.CommandGrant = func(extra sandbox.Grant, env []string) (sandbox.Grant, []string) {
		g := builtin.CommandGrant(ws, builtin.Config{CommandSandbox: extra, CommandEnv: env})
		return g, g.Env
	}
	tools := mustBuild(t, `
tools:
  command:
    - name: show
      description: Print each argument in brackets.
      argv: [printf, "[%s]", "{text}", "{more}"]
      args: {type: object, required: [text], properties: {text: {type: string}, more: {type: array, items: {type: string}}}}
    - name: remove
      description: Remove files.
      argv: [rm, "-f", "{paths}"]
      args: {type: object, required: [paths], properties: {paths: {type: array, items: {type: string}}}}
    - name: remove_operands
      description: Remove files, dashes allowed.
      argv: [rm, "--", "{paths}"]
      args: {type: object, required: [paths], properties: {paths: {type: array, items: {type: string}}}}
`, o)
	if s := tools["show"].Spec(); s.Tier != tool.TierPrivileged || s.Source != "command" {
		t.Errorf("spec %+v", s)
	}
	res, err := call(t, tools["show"], map[string]any{"text": "; rm -rf /", "more": []string{"$(id)", "a b"}})
	if err != nil || res.IsError {
		t.Fatalf("%v %q", err, res.Content)
	}
	if !strings.HasSuffix(res.Content, "[; rm -rf /][$(id)][a b]") || !strings.Contains(res.Content, "exit code: 0") {
		t.Errorf("output %q: the argument is not one argv entry", res.Content)
	}
	// Confined: the workspace is writable, the rest of the machine is not.
	res, err = call(t, tools["remove_operands"], map[string]any{"paths": []string{canary}})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(canary); err != nil || string(b) != "still here" {
		t.Errorf("the command removed a file outside its grant (%v): %q", err, res.Content)
	}
	if !res.IsError {
		t.Errorf("rm of a file outside the grant succeeded: %q", res.Content)
	}
	inside := filepath.Join(ws, "scratch")
	os.WriteFile(inside, nil, 0o600)
	if res, err := call(t, tools["remove_operands"], map[string]any{"paths": []string{inside}}); err != nil || res.IsError {
		t.Errorf("rm inside the workspace: %v %q", err, res.Content)
	}
	if _, err := os.Stat(inside); !os.IsNotExist(err) {
		t.Errorf("the file in the workspace is still there: %v", err)
	}
	// A value the program would read as an option.
	_, err = call(t, tools["remove"], map[string]any{"paths": []string{"-rf", "/"}})
	if !errors.Is(err, &tool.Error{Code: tool.CodeInvalidArgs}) || !strings.Contains(err.Error(), "option") {
		t.Errorf("-rf as a path: %v", err)
	}
}

// TestCommandLoadErrors: the program is written out and exists; argv holds
// no secret; placeholders name declared arguments.
func TestCommandLoadErrors(t *testing.T) {
	for _, c := range []struct{ entry, says string }{
		{`{name: c, description: d, argv: ["{prog}"], args: {type: object, properties: {prog: {type: string}}}}`, "must be written out"},
		{`{name: c, description: d, argv: [no-such-program-xyz]}`, "not a program on PATH"},
		{`{name: c, description: d, argv: [printf, "${env:HOME}"]}`, "pass it by name in env"},
		{`{name: c, description: d, argv: [printf, "{x}"]}`, "names an argument args does not declare"},
		{`{name: c, description: d, argv: []}`, "is empty"},
	} {
		_, err := build(t, "tools:\n  command:\n    - "+c.entry+"\n", options(nil, nil))
		if err == nil || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "kernel.yaml:3") {
			t.Errorf("%s: %v", c.entry, err)
		}
	}
}

// TestInline: a written answer, with the arguments filled in, as text or
// as JSON built as data.
func TestInline(t *testing.T) {
	tools := mustBuild(t, `
tools:
  inline:
    - name: freeze
      description: Whether deploys are frozen.
      text: "Deploys to {env} are frozen until Monday. Ask #release."
      args: {type: object, properties: {env: {type: string}}}
    - name: flags
      description: Feature flags.
      json: {checkout_v2: true, region: "{region}", note: "for {region}"}
      args: {type: object, properties: {region: {type: string}}}
`, options(nil, nil))
	res, err := call(t, tools["freeze"], map[string]string{"env": "prod"})
	if err != nil || res.Content != "Deploys to prod are frozen until Monday. Ask #release." || tools["freeze"].Spec().Tier != tool.TierReadOnly {
		t.Errorf("text: %q %v", res.Content, err)
	}
	res, err = call(t, tools["flags"], map[string]string{"region": `eu", "admin": true, "x": "`})
	if err != nil || res.Content != `{"checkout_v2":true,"note":"for eu\", \"admin\": true, \"x\": \"","region":"eu\", \"admin\": true, \"x\": \""}` {
		t.Errorf("json: %s %v", res.Content, err)
	}
	if res, _ := call(t, tools["flags"], map[string]string{}); res.Content != `{"checkout_v2":true}` {
		t.Errorf("json without the argument: %s", res.Content)
	}
	if _, err := build(t, "tools:\n  inline:\n    - {name: s, description: d, text: \"key ${env:HOME}\"}\n", options(nil, nil)); err == nil || !strings.Contains(err.Error(), "cannot hold a secret") {
		t.Errorf("a secret in an inline answer: %v", err)
	}
}
