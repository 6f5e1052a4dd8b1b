package wasm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
)

// TestArgvGojq runs a program nobody wrote for this project: gojq's own
// command line (github.com/itchyny/gojq/cmd/gojq), compiled unmodified
// to WASI. The argv ABI's templates turn each call into a command line.
func TestArgvGojq(t *testing.T) {
	h := newTestHost(t)
	tools, _ := load(t, h, ModuleConfig{Path: gojqWasm})
	for _, tc := range []struct {
		name, args, want string
		code             string // ToolError code when the program fails
	}{
		{name: "filter", args: `{"filter": ".a", "input": {"a": [1, 2]}}`, want: "[1,2]\n"},
		{name: "raw flag from a template", args: `{"filter": ".[]", "input": ["x", "y"], "raw": true}`, want: "x\ny\n"},
		{name: "numbers keep their digits", args: `{"filter": ".n", "input": {"n": 12345678901234567890}}`, want: "12345678901234567890\n"},
		// "--" in the template: a filter that looks like an option is a filter.
		{name: "option injection", args: `{"filter": "--arg", "input": 1}`, want: "gojq: compile error", code: "exit"},
		{name: "program error", args: `{"filter": ".a.b", "input": {"a": 5}}`, want: "expected an object but got: number (5)", code: "exit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tools.call(t, "gojq", tc.args)
			if tc.code == "" {
				if err != nil || res.IsError || res.Content != tc.want {
					t.Fatalf("%+v, %v; want %q", res, err, tc.want)
				}
				return
			}
			if te := toolError(t, err); te.Code != tc.code || !strings.Contains(res.Content, tc.want) || !res.IsError {
				t.Fatalf("%+v, %v; want a %s error mentioning %q", res, err, tc.code, tc.want)
			}
		})
	}
}

func TestRenderArgv(t *testing.T) {
	ms := mustSchema(t)
	man, err := ms.parseManifest("t.json", []byte(`{"name": "prog", "abi": "argv", "tools": [{"name": "t", "description": "d", "tier": "read_only",
		"argv": {"args": ["-x", "{{if .flag}}--flag{{end}}", "{{.word}}", "{{json .obj}}", "{{.n}}"], "stdin": "{{json .}}"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tl := &tool{m: &module{name: "prog"}, def: &man.Tools[0], spec: kernel.ToolSpec{Name: "t"}}
	argv, stdin, err := tl.renderArgv(json.RawMessage(`{"word": "a b", "obj": {"k": [1]}, "n": 1e400}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"prog", "-x", "a b", `{"k":[1]}`, "1e400"}
	if strings.Join(argv, "|") != strings.Join(want, "|") {
		t.Errorf("argv %q, want %q", argv, want)
	}
	if string(stdin) != `{"n":1e400,"obj":{"k":[1]},"word":"a b"}` {
		t.Errorf("stdin %s", stdin)
	}
	_, _, err = tl.renderArgv(json.RawMessage(`{"obj": 1, "n": 2}`))
	if err == nil || !strings.Contains(err.Error(), "guard optional ones with {{if}}") {
		t.Errorf("a missing argument printed: %v", err)
	}
	// An argument that itself says "<no value>" is an argument like any other.
	argv, _, err = tl.renderArgv(json.RawMessage(`{"word": "<no value>", "obj": 1, "n": 2}`))
	if err != nil || argv[2] != "<no value>" {
		t.Errorf("an argument containing <no value>: %q, %v; want it passed through", argv, err)
	}
	// An unguarded stdin template fails the same way instead of sending
	// "<no value>" to the program.
	man2, err := ms.parseManifest("t.json", []byte(`{"name": "prog", "abi": "argv", "tools": [{"name": "t", "description": "d", "tier": "read_only",
		"argv": {"args": [], "stdin": "{{.input}}"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tl2 := &tool{m: &module{name: "prog"}, def: &man2.Tools[0], spec: kernel.ToolSpec{Name: "t"}}
	if _, stdin, err := tl2.renderArgv(json.RawMessage(`{}`)); !errors.Is(err, kernel.ErrInvalidArgs) || !strings.Contains(fmt.Sprint(err), "render stdin") {
		t.Errorf("stdin %q, error %v; want a missing-argument error", stdin, err)
	}
	if _, _, err := tl.renderArgv(json.RawMessage(`[1]`)); !errors.Is(err, kernel.ErrInvalidArgs) {
		t.Errorf("non-object arguments: %v", err)
	}
}
