package builtin_test

import (
	"testing"

	"github.com/agentkernel/agentkernel/kernel/tokenizer"
	"github.com/agentkernel/agentkernel/kernel/toolproto"
	"github.com/agentkernel/agentkernel/plugins/builtin"
)

// BenchmarkProtocolInstructions reports what the text tool protocol adds
// to the system prompt for the demo's six built-in tools, in o200k_base
// tokens (instruction_tokens), beside what the same tools cost as a
// native "tools" field (tools_json_tokens, their JSON as OpenAI's API
// takes it), and how long rendering the instructions takes.
func BenchmarkProtocolInstructions(b *testing.B) {
	tools, closer, err := builtin.New(builtin.Config{Root: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer closer.Close()
	if len(tools) != 6 {
		b.Fatalf("%d built-in tools, want the demo's six", len(tools))
	}
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		b.Fatal(err)
	}
	specs := make([]toolproto.Tool, len(tools))
	native := 0
	for i, t := range tools {
		s := t.Spec()
		specs[i] = toolproto.Tool{Name: s.Name, Description: s.Description, Parameters: s.Schema}
		native += enc.Count(`{"type":"function","function":{"name":"` + s.Name + `","description":"` + s.Description + `","parameters":` + string(s.Schema) + `}}`)
	}
	for _, format := range toolproto.Formats() {
		c, err := toolproto.Lookup(format)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(format, func(b *testing.B) {
			text := c.Instructions(specs)
			b.ReportAllocs()
			for b.Loop() {
				_ = c.Instructions(specs)
			}
			b.ReportMetric(float64(enc.Count(text)), "instruction_tokens")
			b.ReportMetric(float64(native), "tools_json_tokens")
		})
	}
}
