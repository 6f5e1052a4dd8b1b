package kernel_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// signingModel answers like a model whose thinking is signed: every
// answer of the second run calls echo with a long text and carries a
// reasoning block, ten times, then answers; summaries are plain text. It
// records every turn request.
type signingModel struct {
	signed bool
	mu     sync.Mutex
	reqs   []kernel.Request
}

func (p *signingModel) Stream(_ context.Context, req kernel.Request, _ func(kernel.Delta)) (kernel.Response, error) {
	if strings.Contains(req.Messages[0].Content, "You compact the history") {
		return kernel.Response{Message: kernel.Message{Content: "SUMMARY: the first question was answered."}}, nil
	}
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	p.mu.Unlock()
	last := req.Messages[len(req.Messages)-1]
	if last.Role == kernel.RoleUser && strings.HasPrefix(last.Content, "first") {
		return kernel.Response{Message: kernel.Message{Content: strings.Repeat("a long first answer. ", 100)}}, nil
	}
	n := 0 // the next call: one past the last result's number
	if last.Role == kernel.RoleTool {
		if _, err := fmt.Sscanf(last.Content, "result %d", &n); err != nil {
			return kernel.Response{}, err
		}
		n++
	}
	if n >= 10 {
		return kernel.Response{Message: kernel.Message{Content: "done"}}, nil
	}
	m := kernel.Message{Content: "", ToolCalls: []kernel.ToolCall{{ID: fmt.Sprintf("t%d", n), Name: "echo",
		Arguments: fmt.Sprintf(`{"text":%q}`, strings.Repeat(fmt.Sprintf("result %d ", n), 60))}}}
	if p.signed {
		m.Reasoning = fmt.Sprintf("thinking %d", n)
		m.ReasoningBlocks = []kernel.ReasoningBlock{{Provider: "test", Index: 0, Data: []byte(fmt.Sprintf("signed-%d", n))}}
	}
	return kernel.Response{Message: m}, nil
}

// TestCompactionKeepsSignedTurnWhole: when the context must be compacted
// in the middle of a tool-use turn whose answers carry reasoning blocks,
// the summary stops at the user message that opened the turn, and every
// answer of the turn goes on being sent with its blocks. Without blocks
// the same history is summarised inside the turn (the control).
func TestCompactionKeepsSignedTurnWhole(t *testing.T) {
	for _, signed := range []bool{true, false} {
		t.Run(fmt.Sprintf("signed=%v", signed), func(t *testing.T) {
			p := &signingModel{signed: signed}
			reg := kernel.NewRegistry()
			if err := reg.Register(kerneltest.EchoTool("echo")); err != nil {
				t.Fatal(err)
			}
			var compacted []kernel.ContextCompacted
			k, err := kernel.New(kernel.Config{Provider: p, Store: memory.New(), Tools: reg, Model: "m", ContextWindow: 4000, MaxTurns: 20,
				OnEvent: func(e kernel.Event) {
					if c, ok := e.(kernel.ContextCompacted); ok && c.Kind == "summarised" {
						compacted = append(compacted, c)
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			res, err := k.Run(context.Background(), "", "first "+strings.Repeat("question ", 400))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := k.Run(context.Background(), res.SessionID, "second: echo ten times"); err != nil {
				t.Fatal(err)
			}
			if len(compacted) == 0 {
				t.Fatal("nothing was summarised: the test does not reach compaction")
			}
			// The requests after the first summary: does every answer of
			// the second run come back whole?
			inTurn := false
			for _, req := range p.reqs {
				for _, m := range req.Messages {
					if m.Role == kernel.RoleTool {
						// The turn's first result is "result 0": a request
						// that starts elsewhere lost part of the turn.
						inTurn = inTurn || !strings.HasPrefix(m.Content, "result 0 ")
						break
					}
				}
			}
			if signed && inTurn {
				t.Error("a request carried part of the signed turn: the summary cut inside it")
			}
			if !signed && !inTurn {
				t.Error("control: without reasoning blocks the summary never cut inside the turn, so the test proves nothing")
			}
		})
	}
}
