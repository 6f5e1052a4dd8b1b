package openai_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
)

// autoSession is newSession with the model on tool_protocol: auto.
func autoSession(t *testing.T, steps ...openaitest.Step) *session {
	t.Helper()
	return newSessionWith(t, "local", func(c *kernel.Config) {
		c.ModelTools = map[string]kernel.ModelTools{"local": {Protocol: kernel.ToolProtocolAuto}}
	}, steps...)
}

// TestAutoToolProtocolOnServers emulates the servers where the text
// protocol matters: each refuses or ignores the tools field for the
// model, auto switches to text, and the run completes with its call
// paired with its result.
func TestAutoToolProtocolOnServers(t *testing.T) {
	const call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	refusal := func(status int, name string) openaitest.Step {
		return openaitest.Step{Status: status, Body: fixture(t, name)}
	}
	tests := []struct {
		name  string
		first openaitest.Step
		// native: the first answer came back (ignored tools), so the
		// model was asked twice, not three times.
		ignored bool
	}{
		{name: "llama.cpp without tool support (no --jinja)", first: refusal(http.StatusInternalServerError, "llamacpp_b5000_tools_requires_jinja.json")},
		{name: "Ollama model without tools", first: refusal(http.StatusBadRequest, "ollama_0.12_does_not_support_tools.json")},
		{name: "vLLM without a tool parser", first: refusal(http.StatusBadRequest, "vllm_0.6_auto_tool_choice.json")},
		{name: "vLLM with the tools field ignored", first: openaitest.Raw(fixture(t, "vllm_0.8_tools_ignored.sse")), ignored: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps := []openaitest.Step{tt.first}
			if !tt.ignored {
				steps = append(steps, openaitest.Text(call))
			}
			steps = append(steps, openaitest.Text("It is sunny in Paris."))
			s := autoSession(t, steps...)
			res := s.run(t, "weather in Paris?")
			if res.StopReason != kernel.StopCompleted || res.Output != "It is sunny in Paris." || len(res.Calls) != 1 || res.Calls[0].Outcome != kernel.OutcomeOK {
				t.Fatalf("result = %+v", res)
			}
			if len(s.ran) != 1 || s.ran[0] != `get_weather:{"city": "Paris"}` {
				t.Fatalf("ran %v", s.ran)
			}
			if len(s.sleeps) != 0 {
				t.Errorf("the switch waited %v: a refusal is not retried", s.sleeps)
			}
			reqs := s.srv.Requests()
			if len(reqs) != len(steps) || s.srv.Remaining() != 0 {
				t.Fatalf("%d requests", len(reqs))
			}
			if len(reqs[0].Chat.Tools) == 0 {
				t.Fatal("auto did not try the tools field first")
			}
			for _, r := range reqs[1:] {
				if len(r.Chat.Tools) != 0 || bytes.Contains(r.Body, []byte(`"tools"`)) || bytes.Contains(r.Body, []byte(`"tool_choice"`)) {
					t.Fatalf("a text-protocol request sent tools: %s", r.Body)
				}
				if !strings.Contains(string(r.Chat.Messages[0].Content), "<tools>") {
					t.Fatalf("no tools in the system prompt: %q", r.Chat.Messages[0].Content)
				}
			}
			// The last request: the call as the model wrote it, then its
			// result paired by id, both as plain chat messages.
			last := reqs[len(reqs)-1].Chat.Messages
			a, u := last[len(last)-2], last[len(last)-1]
			sess, err := s.store.Load(context.Background(), res.SessionID)
			if err != nil {
				t.Fatal(err)
			}
			id := sess.Messages[1].ToolCalls[0].ID
			if a.Role != "assistant" || !strings.Contains(string(a.Content), "<tool_call>") || len(a.ToolCalls) != 0 ||
				u.Role != "user" || !strings.Contains(string(u.Content), `<tool_response id="`+id+`" name="get_weather">`) ||
				!strings.Contains(string(u.Content), "result of get_weather") {
				t.Fatalf("last messages:\n%+v\n%+v", a, u)
			}
			if sess.Messages[2].Role != kernel.RoleTool || sess.Messages[2].ToolCallID != id {
				t.Fatalf("stored result not paired: %+v", sess.Messages[2])
			}
			if sess.Meta.Labels[kernel.LabelTextTools] != "local" {
				t.Fatalf("the switch is not remembered: %+v", sess.Meta)
			}
			notices := 0
			for _, e := range s.events {
				if n, ok := e.(kernel.Notice); ok && n.Source == "tool_protocol" {
					notices++
				}
				if d, ok := e.(kernel.MessageDelta); ok && strings.Contains(d.Text, "tool_call") {
					t.Errorf("a tag reached the user: %q", d.Text)
				}
			}
			if notices != 1 {
				t.Errorf("%d notices, want 1", notices)
			}
		})
	}
}
