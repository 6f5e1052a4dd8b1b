package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/kernel"
)

// Provider plays a pipeline as the model of its session: each generation
// is the calls of the next stage whose steps have no result yet (one call
// of agent.<agent> per step, its task the step's input rendered from the
// run's input and the outputs so far), and the last is the pipeline's
// answer. It reads everything from the request's history, so a pipeline
// resumed after a crash goes on from the steps that have results, and
// the loop stores, accounts and streams it as any run. It is safe for
// concurrent use.
type Provider struct {
	p *Pipeline
}

// NewProvider returns the provider that plays p.
func NewProvider(p *Pipeline) *Provider { return &Provider{p: p} }

// StepCallID is the tool call id of a pipeline step's call.
func StepCallID(step string) string { return "step_" + step }

// SessionAgent is the agent name of a pipeline's sessions
// (kernel.Config.Agent, SessionMeta.Agent): "pipeline:<name>".
func SessionAgent(pipeline string) string { return "pipeline:" + pipeline }

// Stream answers the next generation of the pipeline's run.
func (pp *Provider) Stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	if err := ctx.Err(); err != nil {
		return kernel.Response{}, err
	}
	msgs := req.Messages
	start := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == kernel.RoleUser && msgs[i].CorrectionKind() == "" {
			start = i
			break
		}
	}
	if start < 0 {
		return kernel.Response{}, pp.fail("the run has no input")
	}
	input := msgs[start].Content
	outputs := map[string]string{}
	for _, m := range msgs[start+1:] {
		if m.Role != kernel.RoleTool {
			continue
		}
		step, ok := strings.CutPrefix(m.ToolCallID, "step_")
		if !ok {
			continue
		}
		if m.IsError {
			return kernel.Response{}, pp.fail(fmt.Sprintf("step %s failed: %s", step, m.Content))
		}
		outputs[step] = m.Content
	}
	for _, stage := range pp.p.Stages {
		var calls []kernel.ToolCall
		for _, st := range stage {
			if _, ok := outputs[st.Name]; ok {
				continue
			}
			task := ""
			if st.Input != nil {
				task = st.Input.Render(input, outputs)
			}
			args, err := json.Marshal(map[string]string{"task": task})
			if err != nil {
				return kernel.Response{}, err
			}
			calls = append(calls, kernel.ToolCall{ID: StepCallID(st.Name), Name: kernel.AgentToolPrefix + st.Agent, Arguments: string(args)})
		}
		if len(calls) > 0 {
			return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, ToolCalls: calls}, FinishReason: "tool_calls", Model: req.Model}, nil
		}
	}
	out := pp.output(input, outputs)
	emit(kernel.Delta{Kind: kernel.DeltaText, Text: out})
	return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, Content: out}, FinishReason: "stop", Model: req.Model}, nil
}

// output is the pipeline's answer: its output template, or the last
// stage's outputs (headed by their step names when there are several).
func (pp *Provider) output(input string, outputs map[string]string) string {
	if pp.p.Output != nil {
		return pp.p.Output.Render(input, outputs)
	}
	last := pp.p.Stages[len(pp.p.Stages)-1]
	if len(last) == 1 {
		return outputs[last[0].Name]
	}
	var b strings.Builder
	for i, st := range last {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("## " + st.Name + "\n\n" + outputs[st.Name])
	}
	return b.String()
}

func (pp *Provider) fail(msg string) error {
	return &kernel.ProviderError{Provider: "pipeline", Code: "step_failed", Message: "pipeline " + pp.p.Name + ": " + msg}
}

var _ kernel.Provider = (*Provider)(nil)
