package openai_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/openai"
	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// TestKernelToolSession runs the real kernel loop against the openaitest
// server: the model calls a namespaced tool, the kernel runs it, and the
// model answers with text. It is the session the CLI test scripts.
func TestKernelToolSession(t *testing.T) {
	srv := openaitest.NewServer(t,
		openaitest.ToolCall("notes.echo", `{"text":"hello from the tool"}`),
		openaitest.Step{Reasoning: "The tool answered.", Text: "The tool said: hello from the tool",
			Usage: &kernel.Usage{InputTokens: 120, OutputTokens: 9, CachedInputTokens: 64}},
	)
	p, err := openai.New(openai.Config{BaseURL: srv.URL(), APIKeyEnv: "AGENTKERNEL_TEST_UNSET_KEY"})
	if err != nil {
		t.Fatal(err)
	}

	var calls []string
	tools := kernel.NewRegistry()
	err = tools.Register(kernel.NewTool(kernel.ToolSpec{
		Name: "notes.echo", Description: "Echo the text back.", Tier: kernel.TierReadOnly, Source: "test",
		Schema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	}, func(_ context.Context, args json.RawMessage) (kernel.Result, error) {
		var a struct{ Text string }
		if err := json.Unmarshal(args, &a); err != nil {
			return kernel.Result{}, err
		}
		calls = append(calls, a.Text) // calls run one at a time here: a single call
		return kernel.Result{Content: a.Text}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	var reasoning strings.Builder
	k, err := kernel.New(kernel.Config{
		Provider: p, Store: memory.New(), Tools: tools, Model: "gpt-4o-mini",
		SystemPrompt: "You are terse.", ModelTimeout: 10 * time.Second,
		OnEvent: func(e kernel.Event) {
			if d, ok := e.(kernel.ReasoningDelta); ok {
				reasoning.WriteString(d.Text)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := k.Run(ctx, "", "Echo hello.")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.StopReason != kernel.StopCompleted || res.Output != "The tool said: hello from the tool" {
		t.Errorf("stop %q output %q", res.StopReason, res.Output)
	}
	if len(calls) != 1 || calls[0] != "hello from the tool" {
		t.Errorf("the tool ran with %q", calls)
	}
	if len(res.Calls) != 1 || res.Calls[0].Tool != "notes.echo" {
		t.Errorf("audit trail %+v: the kernel must see its own tool name", res.Calls)
	}
	if res.Usage.CachedInputTokens != 64 || res.Usage.InputTokens <= 120 {
		t.Errorf("usage %+v: want both generations counted, the second as scripted", res.Usage)
	}
	if reasoning.String() != "The tool answered." {
		t.Errorf("reasoning events %q", reasoning.String())
	}

	reqs := srv.Requests()
	if len(reqs) != 2 || srv.Remaining() != 0 {
		t.Fatalf("%d requests, %d steps left", len(reqs), srv.Remaining())
	}
	if names := reqs[0].ToolNames(); len(names) != 1 || names[0] != openaitest.WireName("notes.echo") || names[0] != "notes__echo" {
		t.Errorf("offered %v", names)
	}
	second := reqs[1].Chat.Messages
	if len(second) != 4 {
		t.Fatalf("second request has %d messages, want system, user, assistant, tool", len(second))
	}
	call := second[2].ToolCalls
	if second[0].Role != "system" || second[2].Role != "assistant" || len(call) != 1 || call[0].Function.Name != "notes__echo" {
		t.Errorf("history sent back: %+v", second)
	}
	if tool := second[3]; tool.Role != "tool" || tool.ToolCallID != call[0].ID || tool.Content != "hello from the tool" {
		t.Errorf("tool message %+v does not answer call %q", tool, call[0].ID)
	}
}
