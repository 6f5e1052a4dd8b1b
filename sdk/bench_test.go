package sdk_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/sdk"
	"github.com/agentkernel/agentkernel/sdk/sdktest"
)

// BenchmarkToolCall64KiB measures the SDK's own work on a 64 KiB argument
// (validation, decoding, the handler): no transport.
func BenchmarkToolCall64KiB(b *testing.B) {
	args, _ := json.Marshal(map[string]string{"text": strings.Repeat("a", 64<<10)})
	tool := sizeTool()
	b.SetBytes(int64(len(args)))
	for b.Loop() {
		if _, err := tool.Call(context.Background(), args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInProcess64KiB adds the SDK's gRPC service over an in-memory
// connection (no TLS, no process boundary).
func BenchmarkInProcess64KiB(b *testing.B) {
	args, _ := json.Marshal(map[string]string{"text": strings.Repeat("a", 64<<10)})
	p := sdktest.Start(b, sizeTool())
	b.SetBytes(int64(len(args)))
	for b.Loop() {
		if _, err := p.Call(context.Background(), "size", string(args)); err != nil {
			b.Fatal(err)
		}
	}
}

func sizeTool() *sdk.Tool {
	return sdk.Text(sdk.Spec{Name: "size", Tier: sdk.ReadOnly,
		Schema: `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`},
		func(_ context.Context, a struct {
			Text string `json:"text"`
		}) (string, error) {
			return "ok", nil
		})
}
