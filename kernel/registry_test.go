package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
)

func TestRegisterErrors(t *testing.T) {
	nop := func(context.Context, json.RawMessage) (kernel.Result, error) { return kernel.Result{}, nil }
	tool := func(name string, tier kernel.Tier, schema string) kernel.Tool {
		return kernel.NewTool(kernel.ToolSpec{Name: name, Description: "d", Tier: tier, Schema: json.RawMessage(schema), Source: "test"}, nop)
	}
	cases := []struct {
		name string
		tool kernel.Tool
		want string
	}{
		{"bad schema", tool("broken", kernel.TierReadOnly, `{"type":"object","properties":{"n":{"type":"integr"}}}`), `register tool "broken": invalid schema`},
		{"not JSON", tool("garbled", kernel.TierReadOnly, `{"type":`), `register tool "garbled": schema is not a JSON object`},
		{"array schema", tool("arr", kernel.TierReadOnly, `{"type":"array"}`), `schema type must be "object"`},
		{"remote ref", tool("remote", kernel.TierReadOnly, `{"$ref":"https://example.com/s.json"}`), `remote $ref`},
		{"no tier", tool("tierless", "", `{}`), `register tool "tierless": tier "" is not one of`},
		{"bad name", tool("has space", kernel.TierReadOnly, `{}`), `name must be 1-64 characters`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := kernel.NewRegistry().Register(tc.tool)
			var re *kernel.RegistrationError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Register = %v, want a RegistrationError containing %q", err, tc.want)
			}
		})
	}
	r := kernel.NewRegistry()
	if err := r.Register(kerneltest.EchoTool("echo")); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(kerneltest.EchoTool("other"), kerneltest.EchoTool("echo")); !errors.Is(err, kernel.ErrDuplicateTool) {
		t.Fatalf("duplicate = %v", err)
	}
	if r.Len() != 1 {
		t.Fatalf("a failed Register added tools: %v", r.Names())
	}
}

func TestValidateMessages(t *testing.T) {
	r := kernel.NewRegistry()
	spec := kernel.ToolSpec{Name: "t", Description: "d", Tier: kernel.TierReadOnly, Source: "test", Schema: json.RawMessage(`{
		"type":"object","additionalProperties":false,"required":["path"],
		"properties":{"path":{"type":"string","minLength":1},"count":{"type":"integer","minimum":1},
		"opts":{"type":"object","properties":{"mode":{"enum":["a","b"]}}}}}`)}
	if err := r.Register(kernel.NewTool(spec, nil)); err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{
		`{"path":"x","count":"3"}`:         "/count: expected integer, got string",
		`{"count":0}`:                      "/: missing properties: 'path'; /count: must be >= 1 but found 0",
		`{"path":"x","opts":{"mode":"c"}}`: "/opts/mode: value must be one of",
		`{"path":"x","extra":1}`:           "/: additionalProperties 'extra' not allowed",
		`{"path":""}`:                      "/path: length must be >= 1",
		``:                                 "/: missing properties: 'path'",
	} {
		_, err := r.Validate("t", json.RawMessage(args))
		if !errors.Is(err, kernel.ErrInvalidArgs) || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate(%s) = %v, want %q", args, err, want)
		}
	}
	if v, err := r.Validate("t", json.RawMessage(`{"path":"ok","count":2}`)); err != nil || v["path"] != "ok" {
		t.Fatalf("valid args: %v %v", v, err)
	}
}

// BenchmarkValidate is the schema-validation step alone (parse + validate
// the arguments of the benchmark's read_file call), for attributing
// BenchmarkDispatch.
func BenchmarkValidate(b *testing.B) {
	reg := kernel.NewRegistry()
	spec := kernel.ToolSpec{Name: "read_file", Description: "read", Tier: kernel.TierReadOnly, Source: "bench",
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}`)}
	if err := reg.Register(kernel.NewTool(spec, nil)); err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{"path":"main.go","limit":20}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Validate("read_file", args); err != nil {
			b.Fatal(err)
		}
	}
}
