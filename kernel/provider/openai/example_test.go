package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/openai"
)

// Example streams one response from a local OpenAI-compatible server (here
// one that replays a recorded stream; in real use Ollama, vLLM, llama.cpp,
// LM Studio, or the OpenAI API itself). A loopback server needs no API key.
func Example() {
	recorded, err := os.ReadFile("testdata/text_and_tool_call.sse")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(recorded)
	}))
	defer srv.Close()

	p, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", APIKeyEnv: "EXAMPLE_UNSET_KEY"})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := kernel.Request{
		Model: "gpt-4o",
		Messages: []kernel.Message{
			{Role: kernel.RoleUser, Content: "What's the weather in Paris?"},
		},
		Tools: []kernel.ToolSpec{{
			Name:        "get_weather",
			Description: "Current weather for a city.",
			Schema:      json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
			Tier:        kernel.TierReadOnly,
		}},
	}
	resp, err := p.Stream(context.Background(), req, func(d kernel.Delta) {
		fmt.Print(d.Text) // text as it streams
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println()
	for _, c := range resp.Message.ToolCalls {
		fmt.Println("call", c.Name, c.Arguments)
	}
	fmt.Printf("finish=%s model=%s input=%d output=%d\n", resp.FinishReason, resp.Model, resp.Usage.InputTokens, resp.Usage.OutputTokens)
	// Output:
	// I'll check the weather in Paris for you.
	// call get_weather {"city":"Paris"}
	// finish=tool_calls model=gpt-4o-2024-08-06 input=96 output=31
}
