package kernel

import "sync"

// Tokenizer counts the tokens of a text as a model's tokenizer does.
// Implementations must be safe for concurrent use. kernel/tokenizer holds
// the OpenAI encodings (o200k_base, cl100k_base).
type Tokenizer interface {
	Count(text string) int
}

// TokenizerFunc adapts a function to a Tokenizer.
type TokenizerFunc func(text string) int

// Count calls f.
func (f TokenizerFunc) Count(text string) int { return f(text) }

// The framing the chat format adds, as OpenAI documents it for its chat
// models: every message costs perMessage tokens besides its content, and
// every reply is primed with perReply tokens. A tool call and an offered
// tool cost a few tokens of framing too (measured against usage reports;
// the calibration below absorbs what is left).
const (
	perMessage  = 3
	perReply    = 3
	perToolCall = 7
	perToolSpec = 8
)

// estimate is the fallback count for a model without a tokenizer: 4 bytes a
// token, the ratio of English prose and code in OpenAI encodings. The
// calibration corrects it per model once the server has reported usage.
func estimate(text string) int { return (len(text) + 3) / 4 }

// countMessage is the tokens m takes in a request, framing included.
func countMessage(count func(string) int, m *Message) int {
	n := perMessage + count(m.Content)
	if m.Role == RoleTool {
		n += count(m.ToolCallID)
	}
	for i := range m.ToolCalls {
		c := &m.ToolCalls[i]
		n += perToolCall + count(c.ID) + count(c.Name) + count(c.Arguments)
	}
	return n
}

// countTool is the tokens an offered tool takes.
func countTool(count func(string) int, t *ToolSpec) int {
	return perToolSpec + count(t.Name) + count(t.Description) + count(string(t.Schema))
}

// countRequest counts the tokens of a request from scratch with tok (nil
// means the 4-bytes-a-token estimate, uncalibrated): every message, the
// offered tools and the reply priming. The loop counts the same way,
// incrementally; tests use countRequest to check it.
func countRequest(tok Tokenizer, msgs []Message, tools []ToolSpec) int {
	count := estimate
	if tok != nil {
		count = tok.Count
	}
	n := perReply
	for i := range msgs {
		n += countMessage(count, &msgs[i])
	}
	for i := range tools {
		n += countTool(count, &tools[i])
	}
	return n
}

// calibration learns, per model, the ratio of the prompt tokens a server
// reports to the kernel's estimate of the same request. It is safe for
// concurrent use.
type calibration struct {
	mu    sync.Mutex
	ratio map[string]float64
}

// get returns the ratio learnt for model (1 before any usage report).
func (c *calibration) get(model string) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.ratio[model]; ok {
		return r
	}
	return 1
}

// observe folds one report in: the first sets the ratio, later ones move
// it a quarter of the way (a moving average that follows a drift without
// jumping on one odd request).
func (c *calibration) observe(model string, estimated int, reported int64) {
	if estimated <= 0 || reported <= 0 || model == "" {
		return
	}
	x := float64(reported) / float64(estimated)
	if x < 0.2 || x > 5 {
		return // not the same request (a proxy adding a prompt, a cache): ignore
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ratio == nil {
		c.ratio = map[string]float64{}
	}
	if r, ok := c.ratio[model]; ok {
		x = r + (x-r)/4
	}
	c.ratio[model] = x
}
