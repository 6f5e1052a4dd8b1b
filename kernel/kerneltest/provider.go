package kerneltest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/agentkernel/agentkernel/kernel"
)

// Reply is one scripted generation of a Provider: text, tool calls, usage,
// or an error. Wait, when set, makes the generation block until ctx is done
// (to test cancellation of the model call).
type Reply struct {
	Text      string
	Reasoning string
	Calls     []kernel.ToolCall
	Usage     kernel.Usage
	Err       error
	Wait      bool
	// Chunk, when set, streams Text in pieces of at most Chunk bytes, as
	// a server streams tokens; otherwise it comes as one piece.
	Chunk int
	// Started, when set, is closed when the reply starts playing (the
	// model call is in flight).
	Started chan struct{}
}

// Text is a reply with text only.
func Text(s string) Reply { return Reply{Text: s} }

// Calls is a reply with tool calls; each pair is a tool name and its
// arguments (any value, marshalled to JSON; a string is used as is, so
// malformed JSON can be scripted). Call ids are "c1", "c2", ... in order.
func Calls(nameArgs ...any) Reply {
	var r Reply
	for i := 0; i+1 < len(nameArgs); i += 2 {
		var args string
		switch a := nameArgs[i+1].(type) {
		case string:
			args = a
		default:
			b, err := json.Marshal(a)
			if err != nil {
				panic(err)
			}
			args = string(b)
		}
		r.Calls = append(r.Calls, kernel.ToolCall{ID: fmt.Sprintf("c%d", i/2+1), Name: nameArgs[i].(string), Arguments: args})
	}
	return r
}

// Provider is a fake kernel.Provider that plays Replies in order and
// records every request. It is safe for concurrent use.
type Provider struct {
	mu        sync.Mutex
	replies   []Reply
	next      int
	requests  []kernel.Request
	cancelled int
}

// NewProvider returns a Provider that plays replies in order.
func NewProvider(replies ...Reply) *Provider { return &Provider{replies: replies} }

// Stream plays the next reply. Running out of replies is an error.
func (p *Provider) Stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	p.mu.Lock()
	req.Messages = append([]kernel.Message(nil), req.Messages...)
	req.Tools = append([]kernel.ToolSpec(nil), req.Tools...)
	p.requests = append(p.requests, req)
	if p.next >= len(p.replies) {
		p.mu.Unlock()
		return kernel.Response{}, fmt.Errorf("kerneltest.Provider: no reply left for request %d", len(p.requests))
	}
	r := p.replies[p.next]
	p.next++
	p.mu.Unlock()
	if r.Started != nil {
		close(r.Started)
	}
	if r.Wait {
		<-ctx.Done()
		p.mu.Lock()
		p.cancelled++
		p.mu.Unlock()
		return kernel.Response{}, ctx.Err()
	}
	if r.Err != nil {
		return kernel.Response{}, r.Err
	}
	if r.Reasoning != "" {
		emit(kernel.Delta{Kind: kernel.DeltaReasoning, Text: r.Reasoning})
	}
	for rest := r.Text; rest != ""; {
		n := len(rest)
		if r.Chunk > 0 {
			n = min(n, r.Chunk)
		}
		emit(kernel.Delta{Kind: kernel.DeltaText, Text: rest[:n]})
		rest = rest[n:]
	}
	return kernel.Response{
		Message: kernel.Message{Role: kernel.RoleAssistant, Content: r.Text, Reasoning: r.Reasoning, ToolCalls: append([]kernel.ToolCall(nil), r.Calls...)},
		Usage:   r.Usage, Model: req.Model, FinishReason: finish(r),
	}, nil
}

func finish(r Reply) string {
	if len(r.Calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// Requests returns copies of the requests received so far.
func (p *Provider) Requests() []kernel.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]kernel.Request(nil), p.requests...)
}

// Cancelled counts the Wait replies whose model call was cancelled (their
// ctx ended while they waited).
func (p *Provider) Cancelled() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cancelled
}

// Remaining is the number of replies not played yet.
func (p *Provider) Remaining() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.replies) - p.next
}

var _ kernel.Provider = (*Provider)(nil)
