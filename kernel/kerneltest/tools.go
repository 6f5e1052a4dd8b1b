package kerneltest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// EchoTool returns a read-only tool named name that answers with its
// arguments' "text" field. Its schema requires "text" (a string).
func EchoTool(name string) kernel.Tool {
	spec := kernel.ToolSpec{
		Name: name, Description: "Echo the text back.", Tier: kernel.TierReadOnly, Source: "test",
		Schema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`),
	}
	return kernel.NewTool(spec, func(_ context.Context, args json.RawMessage) (kernel.Result, error) {
		var a struct{ Text string }
		if err := json.Unmarshal(args, &a); err != nil {
			return kernel.Result{}, err
		}
		return kernel.Result{Content: a.Text}, nil
	})
}

// Recorder is a tool that records its calls and answers with a fixed
// text. Block, when set, makes every call wait until ctx is done or the
// channel is closed.
type Recorder struct {
	ToolSpec kernel.ToolSpec
	Answer   string
	Err      error
	Block    chan struct{}
	// Delay makes every call take this long (honouring ctx).
	Delay time.Duration

	mu      sync.Mutex
	calls   []json.RawMessage
	active  atomic.Int32
	maxSeen atomic.Int32
}

// NewRecorder returns a Recorder tool with an open object schema.
func NewRecorder(name string, tier kernel.Tier, answer string) *Recorder {
	return &Recorder{ToolSpec: kernel.ToolSpec{Name: name, Description: "records calls", Tier: tier, Source: "test"}, Answer: answer}
}

// Spec returns the tool's spec.
func (r *Recorder) Spec() kernel.ToolSpec { return r.ToolSpec }

// Call records args and answers.
func (r *Recorder) Call(ctx context.Context, args json.RawMessage) (kernel.Result, error) {
	n := r.active.Add(1)
	defer r.active.Add(-1)
	for {
		m := r.maxSeen.Load()
		if n <= m || r.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	r.mu.Lock()
	r.calls = append(r.calls, append(json.RawMessage(nil), args...))
	r.mu.Unlock()
	if r.Block != nil {
		select {
		case <-r.Block:
		case <-ctx.Done():
			return kernel.Result{}, ctx.Err()
		}
	}
	if r.Delay > 0 {
		select {
		case <-time.After(r.Delay):
		case <-ctx.Done():
			return kernel.Result{}, ctx.Err()
		}
	}
	if r.Err != nil {
		return kernel.Result{}, r.Err
	}
	return kernel.Result{Content: r.Answer}, nil
}

// Calls returns the arguments of every call so far.
func (r *Recorder) Calls() []json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]json.RawMessage(nil), r.calls...)
}

// MaxConcurrent is the largest number of calls that were running at once.
func (r *Recorder) MaxConcurrent() int { return int(r.maxSeen.Load()) }

// TestTool runs the Tool conformance suite: the spec registers (name, tier,
// schema), validArgs pass validation, a call with validArgs succeeds, and a
// call whose context is already cancelled returns (an error or a result)
// instead of hanging.
func TestTool(t *testing.T, tool kernel.Tool, validArgs json.RawMessage) {
	t.Helper()
	spec := tool.Spec()
	reg := kernel.NewRegistry()
	if err := reg.Register(tool); err != nil {
		t.Fatalf("register %s: %v", spec.Name, err)
	}
	if spec.Description == "" {
		t.Errorf("%s: empty description (the model reads it to choose tools)", spec.Name)
	}
	if spec.Source == "" {
		t.Errorf("%s: empty Source", spec.Name)
	}
	if _, err := reg.Validate(spec.Name, validArgs); err != nil {
		t.Fatalf("%s: valid arguments rejected: %v", spec.Name, err)
	}
	if _, err := reg.Validate(spec.Name, json.RawMessage(`[]`)); !errors.Is(err, kernel.ErrInvalidArgs) {
		t.Errorf("%s: an array as arguments: %v, want ErrInvalidArgs", spec.Name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tool.Call(ctx, validArgs); err != nil {
		t.Errorf("%s: call with valid arguments: %v", spec.Name, err)
	}
	done, stop := context.WithCancel(context.Background())
	stop()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		_, _ = tool.Call(done, validArgs)
	}()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: a call with a cancelled context did not return", spec.Name)
	}
}

var _ kernel.Tool = (*Recorder)(nil)
