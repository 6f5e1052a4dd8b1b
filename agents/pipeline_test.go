package agents

import (
	"context"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/kernel"
)

const reviewYAML = `review:
  steps:
    - {name: plan, agent: planner, input: "Plan {{input}}."}
    - parallel:
        - {name: a, agent: reviewer, input: "A: {{steps.plan.output}}"}
        - {name: b, agent: reviewer, input: "B: {{steps.plan.output}}"}
    - {name: report, agent: writer, input: "{{steps.a.output}} / {{steps.b.output}}"}
`

func decodePipelines(t *testing.T, src string) *Config {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(src), &n); err != nil {
		t.Fatal(err)
	}
	c, err := Decode("k.yaml", nil, "k.yaml", n.Content[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestProviderPlaysFromHistory: the pipeline's provider reads the
// outputs so far from the request's history, so a pipeline resumed after
// a crash goes on from the steps that have results: here the plan and one
// of the parallel pair have answered, so the next generation calls only
// the other, and once it answers, the join.
func TestProviderPlaysFromHistory(t *testing.T) {
	p := NewProvider(decodePipelines(t, reviewYAML).Pipeline("review"))
	ctx := context.Background()
	msgs := []kernel.Message{{Role: kernel.RoleUser, Content: "main.go"}}
	gen := func() kernel.Response {
		t.Helper()
		res, err := p.Stream(ctx, kernel.Request{Messages: msgs}, func(kernel.Delta) {})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, res.Message)
		return res
	}
	answer := func(step, out string) {
		msgs = append(msgs, kernel.Message{Role: kernel.RoleTool, ToolCallID: StepCallID(step), ToolName: "agent.x", Content: out})
	}
	res := gen()
	if len(res.Message.ToolCalls) != 1 || res.Message.ToolCalls[0].Name != "agent.planner" || res.Message.ToolCalls[0].Arguments != `{"task":"Plan main.go."}` {
		t.Fatalf("first generation %+v", res.Message.ToolCalls)
	}
	answer("plan", "look at x")
	res = gen()
	if len(res.Message.ToolCalls) != 2 || res.Message.ToolCalls[1].Arguments != `{"task":"B: look at x"}` {
		t.Fatalf("second generation %+v", res.Message.ToolCalls)
	}
	answer("a", "fine")
	// The kernel stopped here; the resumed run asks again: only b.
	msgs = msgs[:len(msgs):len(msgs)]
	res = gen()
	if len(res.Message.ToolCalls) != 1 || res.Message.ToolCalls[0].ID != "step_b" {
		t.Fatalf("after a crash with a answered: %+v", res.Message.ToolCalls)
	}
	answer("b", "ok")
	res = gen()
	if len(res.Message.ToolCalls) != 1 || res.Message.ToolCalls[0].Arguments != `{"task":"fine / ok"}` {
		t.Fatalf("join %+v", res.Message.ToolCalls)
	}
	answer("report", "all good")
	if res = gen(); res.Message.Content != "all good" || res.FinishReason != "stop" {
		t.Fatalf("answer %+v", res)
	}
}

// TestProviderStepFails: a step that answered with an error ends the
// pipeline with that error, naming the step.
func TestProviderStepFails(t *testing.T) {
	p := NewProvider(decodePipelines(t, reviewYAML).Pipeline("review"))
	msgs := []kernel.Message{{Role: kernel.RoleUser, Content: "x"},
		{Role: kernel.RoleAssistant, ToolCalls: []kernel.ToolCall{{ID: "step_plan", Name: "agent.planner"}}},
		{Role: kernel.RoleTool, ToolCallID: "step_plan", Content: "not enough budget left", IsError: true}}
	_, err := p.Stream(context.Background(), kernel.Request{Messages: msgs}, func(kernel.Delta) {})
	if err == nil || !strings.Contains(err.Error(), "step plan failed: not enough budget left") {
		t.Fatalf("err %v", err)
	}
}

// TestTemplate: only {{input}} and {{steps.NAME.output}} expand; text is
// data.
func TestTemplate(t *testing.T) {
	tp, err := ParseTemplate("{{ input }} then {{steps.a.output}} and {{steps.a.output}}")
	if err != nil {
		t.Fatal(err)
	}
	if got := tp.Render("{{steps.a.output}}", map[string]string{"a": "A"}); got != "{{steps.a.output}} then A and A" {
		t.Fatalf("render %q", got)
	}
	if s := tp.Steps(); len(s) != 1 || s[0] != "a" {
		t.Fatalf("steps %v", s)
	}
	for _, bad := range []string{"{{env.HOME}}", "{{steps.a}}", "open {{input"} {
		if _, err := ParseTemplate(bad); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
}
