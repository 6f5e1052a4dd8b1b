package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
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

// BenchmarkRun measures one whole run with the scripted-style provider: user
// message, a model turn with one read-only tool call, the tool, a model turn
// with the final answer; memory store, events on, schema validation on.
func BenchmarkRun(b *testing.B) {
	for _, calls := range []int{1, 10} {
		b.Run(fmt.Sprintf("calls=%d", calls), func(b *testing.B) {
			prov := &benchProvider{calls: calls}
			k, store := benchKernel(b, prov)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				res, err := k.Run(ctx, "", "what is in the workspace?")
				if err != nil || res.StopReason != kernel.StopCompleted {
					b.Fatal(res, err)
				}
				// Steady state: the store does not grow with b.N, so the
				// number is a run's cost, not the GC's cost of b.N sessions.
				if err := store.Delete(ctx, res.SessionID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDispatch measures the pipeline around a no-op tool, schema
// validation included: one model turn with one call, minus a turn without.
func BenchmarkDispatch(b *testing.B) {
	ctx := context.Background()
	for _, mode := range []string{"with-call", "no-call"} {
		b.Run(mode, func(b *testing.B) {
			prov := &benchProvider{calls: 1}
			if mode == "no-call" {
				prov.calls = 0
			}
			k, store := benchKernel(b, prov)
			b.ReportAllocs()
			for b.Loop() {
				res, err := k.Run(ctx, "", "go")
				if err != nil {
					b.Fatal(err)
				}
				if err := store.Delete(ctx, res.SessionID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchKernel(b *testing.B, prov kernel.Provider) (*kernel.Kernel, kernel.SessionDeleter) {
	reg := kernel.NewRegistry()
	spec := kernel.ToolSpec{Name: "read_file", Description: "read", Tier: kernel.TierReadOnly, Source: "bench",
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}`)}
	if err := reg.Register(kernel.NewTool(spec, func(context.Context, json.RawMessage) (kernel.Result, error) {
		return kernel.Result{Content: "package main"}, nil
	})); err != nil {
		b.Fatal(err)
	}
	events := 0
	store := memory.New()
	k, err := kernel.New(kernel.Config{Provider: prov, Store: store, Tools: reg, Model: "m",
		OnEvent: func(kernel.Event) { events++ }})
	if err != nil {
		b.Fatal(err)
	}
	return k, store
}

// benchProvider answers the first generation with `calls` tool calls and the
// second with text, like a scripted provider, without allocating history.
type benchProvider struct{ calls int }

func (p *benchProvider) Stream(_ context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == kernel.RoleUser && p.calls > 0 {
		tc := make([]kernel.ToolCall, p.calls)
		for i := range tc {
			tc[i] = kernel.ToolCall{ID: callIDs[i], Name: "read_file", Arguments: `{"path":"main.go","limit":20}`}
		}
		return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, ToolCalls: tc}, Usage: kernel.Usage{InputTokens: 50, OutputTokens: 10}}, nil
	}
	emit(kernel.Delta{Text: "It is a Go program."})
	return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, Content: "It is a Go program."}, Usage: kernel.Usage{InputTokens: 80, OutputTokens: 6}}, nil
}

var callIDs = []string{"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"}

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
