package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/anthropic"
	"github.com/agentkernel/agentkernel/kernel/provider/anthropic/anthropictest"
	"github.com/agentkernel/agentkernel/kernel/provider/openai"
	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// benchTools are six tools with schemas of a realistic size (about the
// demo's built-ins).
func benchTools(b *testing.B) *kernel.Registry {
	reg := kernel.NewRegistry()
	for i := range 6 {
		spec := kernel.ToolSpec{Name: fmt.Sprintf("tool_%d", i), Tier: kernel.TierReadOnly,
			Description: strings.Repeat(fmt.Sprintf("Tool %d reads part of the workspace and reports it. ", i), 8),
			Schema:      json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"A path in the workspace, relative to its root."},"depth":{"type":"integer","minimum":0,"maximum":8}},"required":["path"]}`)}
		if err := reg.Register(kernel.NewTool(spec, func(_ context.Context, args json.RawMessage) (kernel.Result, error) {
			return kernel.Result{Content: strings.Repeat("line of a file the tool read, with some code in it;\n", 20)}, nil
		})); err != nil {
			b.Fatal(err)
		}
	}
	return reg
}

const benchSystem = "You are a careful coding agent working in a repository. Read before you write, keep changes small, explain what you did."

// turns is the length of the scripted runs: 19 tool rounds and an answer.
const turns = 20

// toolTurn is the scripted model of the benchmarks: a call per turn, then
// an answer.
func toolTurn(n int) (call string, done bool) {
	if n >= turns {
		return "", true
	}
	return fmt.Sprintf("tool_%d", n%6), false
}

// BenchmarkCachedRun runs a 20-turn session against the Anthropic
// emulation, whose prompt cache works as the API's, with the provider's
// breakpoints, and reports the share of input tokens served from the
// cache and the run's cost at Claude Sonnet 4.5's catalog prices with the
// cache and without it (every input token at the input price).
func BenchmarkCachedRun(b *testing.B) {
	price := kernel.Price{InputPerMTok: 3, CacheWriteInputPerMTok: 3.75, CachedInputPerMTok: 0.30, OutputPerMTok: 15}
	var usage []anthropictest.Usage
	for b.Loop() {
		srv := anthropictest.NewResponder(b, func(r *anthropictest.Request, n int) anthropictest.Step {
			name, done := toolTurn(n)
			if done {
				return anthropictest.Text("All read.")
			}
			return anthropictest.Step{Thinking: "Next file.", Calls: []anthropictest.Call{{Name: name, Arguments: `{"path":"src/` + name + `.go"}`}}}
		})
		p, err := anthropic.New(anthropic.Config{BaseURL: srv.URL(), APIKeyEnv: "AGENTKERNEL_TEST_UNSET_KEY"})
		if err != nil {
			b.Fatal(err)
		}
		k, err := kernel.New(kernel.Config{Provider: p, Store: memory.New(), Tools: benchTools(b), Model: "claude-sonnet-4-5",
			SystemPrompt: benchSystem, MaxTurns: turns + 1})
		if err != nil {
			b.Fatal(err)
		}
		if res, err := k.Run(context.Background(), "", "Read the tools' files one by one."); err != nil || res.Turns != turns+1 && res.Turns != turns {
			b.Fatalf("%v %+v", err, res)
		}
		usage = srv.Usage()
	}
	var total, read, write int64
	var cached, plain float64
	for _, u := range usage {
		total += u.Total()
		read += u.CacheRead
		write += u.CacheWrite
		ku := kernel.Usage{InputTokens: u.Total(), CachedInputTokens: u.CacheRead, CacheWriteTokens: u.CacheWrite}
		cached += price.Cost(ku)
		plain += kernel.Price{InputPerMTok: 3}.Cost(kernel.Usage{InputTokens: u.Total()})
	}
	b.ReportMetric(float64(len(usage)), "requests")
	b.ReportMetric(float64(total), "input-tokens")
	b.ReportMetric(100*float64(read)/float64(total), "%cache-read")
	b.ReportMetric(100*float64(write)/float64(total), "%cache-write")
	b.ReportMetric(cached, "input-$-cached")
	b.ReportMetric(plain, "input-$-uncached")
}

// BenchmarkTurnOverhead is the cost of one turn through each provider
// against its local emulation: building the request, sending it over
// loopback, framing and decoding the stream. Compare the two with
// -bench TurnOverhead.
func BenchmarkTurnOverhead(b *testing.B) {
	for _, prov := range []string{"openai", "anthropic"} {
		b.Run(prov, func(b *testing.B) {
			var p kernel.Provider
			var err error
			switch prov {
			case "openai":
				srv := openaitest.NewResponder(b, func(r *openaitest.Request, n int) openaitest.Step {
					return openaitest.ToolCall("tool_0", `{"path":"a.go"}`)
				})
				p, err = openai.New(openai.Config{BaseURL: srv.URL(), APIKeyEnv: "AGENTKERNEL_TEST_UNSET_KEY"})
			default:
				srv := anthropictest.NewResponder(b, func(r *anthropictest.Request, n int) anthropictest.Step {
					return anthropictest.Step{Calls: []anthropictest.Call{{Name: "tool_0", Arguments: `{"path":"a.go"}`}}}
				})
				p, err = anthropic.New(anthropic.Config{BaseURL: srv.URL(), APIKeyEnv: "AGENTKERNEL_TEST_UNSET_KEY"})
			}
			if err != nil {
				b.Fatal(err)
			}
			reg := benchTools(b)
			req := kernel.Request{Model: "m", Tools: reg.Specs(), Messages: []kernel.Message{{Role: kernel.RoleSystem, Content: benchSystem}, {Role: kernel.RoleUser, Content: "go"}}}
			// A history of ten rounds, as a turn in the middle of a run sends.
			for i := range 10 {
				id := fmt.Sprintf("toolu_%d", i)
				req.Messages = append(req.Messages,
					kernel.Message{Role: kernel.RoleAssistant, ToolCalls: []kernel.ToolCall{{ID: id, Name: "tool_0", Arguments: `{"path":"a.go"}`}}},
					kernel.Message{Role: kernel.RoleTool, ToolCallID: id, Content: strings.Repeat("some file content\n", 40)})
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Stream(context.Background(), req, func(kernel.Delta) {}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
