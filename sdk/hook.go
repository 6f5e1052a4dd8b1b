package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"

	"google.golang.org/grpc"

	"github.com/agentkernel/agentkernel/internal/config/names"
	"github.com/agentkernel/agentkernel/sdk/pluginpb"
)

// HookPoints are the hook points a plugin's hook may run at, in the order
// a run meets them (the kernel's HookPoints; docs/hooks.md). before and
// after are a tool call's; the others a run's lifecycle points.
var HookPoints = []string{"run_start", "before_compact", "before_model", "after_model", "before", "after", "run_end"}

// HookInput is what a hook gets: the JSON document a command hook reads
// on stdin at the point (schemas/hook-input.schema.json), with the fields
// every point has decoded. Decode reads the point's own fields.
type HookInput struct {
	// Point is the hook point (the document's phase).
	Point     string `json:"phase"`
	Hook      string `json:"hook"`
	SessionID string `json:"session_id"`
	Run       int    `json:"run"`
	Turn      int    `json:"turn"`
	// Doc is the whole document.
	Doc json.RawMessage `json:"-"`
}

// Decode decodes the document into v (a struct with the point's fields:
// prompt, messages, answer, output, stop_reason, args, result, ...).
func (in HookInput) Decode(v any) error { return json.Unmarshal(in.Doc, v) }

// HookReply is a hook's answer: the document a command hook prints
// (schemas/hook-output.schema.json, the point's entry). The zero value
// allows. Which fields a point takes is docs/hooks.md's; the kernel
// refuses any other (a failure of the hook).
type HookReply struct {
	// Decision is "allow" (or empty) or "block"; Reason says why a hook
	// blocks (at run_end: the message the run goes on with).
	Decision string `json:"decision,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// run_start: replace the prompt; run_start and before_model: add
	// context.
	Prompt  *string `json:"prompt,omitempty"`
	Context string  `json:"context,omitempty"`
	// before_model: replace the content of stored messages of the request.
	Edits []HookEdit `json:"edits,omitempty"`
	// after_model: replace the answer's text or reasoning, refuse calls.
	Text      *string      `json:"text,omitempty"`
	Reasoning *string      `json:"reasoning,omitempty"`
	Refuse    []HookRefuse `json:"refuse,omitempty"`
	// run_end: annotate the run's end.
	Note string `json:"note,omitempty"`
	// before_compact: instructions for the summariser.
	Instructions string `json:"instructions,omitempty"`
	// before and after (a tool call): the command hooks' fields.
	UpdatedArgs       json.RawMessage `json:"updated_args,omitempty"`
	UpdatedResult     *HookResult     `json:"updated_result,omitempty"`
	AdditionalContext string          `json:"additional_context,omitempty"`
}

// HookEdit replaces the content of the stored message Seq.
type HookEdit struct {
	Seq     uint64 `json:"seq"`
	Content string `json:"content"`
}

// HookRefuse refuses the answer's call CallID.
type HookRefuse struct {
	CallID string `json:"call_id"`
	Reason string `json:"reason,omitempty"`
}

// HookResult is a tool call's result in a before or after hook's reply.
type HookResult struct {
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
}

// Block is a reply that blocks with reason.
func Block(reason string) HookReply { return HookReply{Decision: "block", Reason: reason} }

// HookFunc runs a hook. An error is a failure of the hook: the kernel
// applies its fail mode (a block is a reply, not an error). It must
// return once ctx is done (the kernel's time limit for the hook).
type HookFunc func(ctx context.Context, in HookInput) (HookReply, error)

// Hook is a hook a plugin serves: a configuration rule of kind plugin
// names it (docs/hooks.md). Safe for concurrent use if its function is.
type Hook struct {
	name, description string
	points            []string
	fn                HookFunc
	err               error
}

// NewHook returns a hook named name that runs at points. A bad name, an
// unknown point or a nil function is reported by Serve, as a bad tool is.
func NewHook(name, description string, points []string, fn HookFunc) *Hook {
	h := &Hook{name: name, description: description, points: slices.Clone(points), fn: fn}
	switch {
	case names.PluginToolName.Check(name) != nil:
		h.err = fmt.Errorf("hook name %w", names.PluginToolName.Check(name))
	case fn == nil:
		h.err = fmt.Errorf("hook %s: no function", name)
	case len(points) == 0:
		h.err = fmt.Errorf("hook %s: no points (want some of %v)", name, HookPoints)
	}
	for _, p := range points {
		if h.err == nil && !slices.Contains(HookPoints, p) {
			h.err = fmt.Errorf("hook %s: %q is not a hook point (want some of %v)", name, p, HookPoints)
		}
	}
	return h
}

// Name returns the hook's name.
func (h *Hook) Name() string { return h.name }

// Run runs the hook on an input document and returns its reply document
// (nil allows): what the kernel's RunHook does, for tests. A panic is
// returned as an error with code "panic".
func (h *Hook) Run(ctx context.Context, input []byte) (reply []byte, err error) {
	if h.err != nil {
		return nil, h.err
	}
	var in HookInput
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, &Error{Code: CodeInvalidArgs, Message: "the hook input is not a JSON object: " + err.Error()}
	}
	in.Doc = input
	if !slices.Contains(h.points, in.Point) {
		return nil, &Error{Code: CodeInvalidArgs, Message: fmt.Sprintf("hook %s does not run at %q (it runs at %v)", h.name, in.Point, h.points)}
	}
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Code: CodePanic, Message: panicText(r, debug.Stack())}
		}
	}()
	rep, err := h.fn(ctx, in)
	if err != nil {
		return nil, err
	}
	if rep.isZero() {
		return nil, nil
	}
	if rep.Decision == "" {
		rep.Decision = "allow"
	}
	return json.Marshal(rep)
}

func (r *HookReply) isZero() bool {
	return r.Decision == "" && r.Reason == "" && r.Prompt == nil && r.Context == "" && r.Edits == nil && r.Text == nil &&
		r.Reasoning == nil && r.Refuse == nil && r.Note == "" && r.Instructions == "" && r.UpdatedArgs == nil &&
		r.UpdatedResult == nil && r.AdditionalContext == ""
}

// hookService implements pluginpb.HooksServer.
type hookService struct {
	pluginpb.UnimplementedHooksServer
	byName map[string]*Hook
	order  []*Hook
}

func newHookService(hooks []*Hook) (*hookService, error) {
	s := &hookService{byName: map[string]*Hook{}}
	var errs []error
	for _, h := range hooks {
		switch {
		case h == nil:
			errs = append(errs, errors.New("nil hook"))
		case h.err != nil:
			errs = append(errs, h.err)
		case s.byName[h.name] != nil:
			errs = append(errs, fmt.Errorf("hook %s: defined twice", h.name))
		default:
			s.byName[h.name] = h
			s.order = append(s.order, h)
		}
	}
	return s, errors.Join(errs...)
}

func (s *hookService) ListHooks(context.Context, *pluginpb.ListHooksRequest) (*pluginpb.ListHooksResponse, error) {
	out := &pluginpb.ListHooksResponse{SdkVersion: Version}
	for _, h := range s.order {
		out.Hooks = append(out.Hooks, &pluginpb.HookSpec{Name: h.name, Description: h.description, Points: h.points})
	}
	return out, nil
}

func (s *hookService) RunHook(ctx context.Context, req *pluginpb.RunHookRequest) (*pluginpb.RunHookResponse, error) {
	h, ok := s.byName[req.GetHook()]
	if !ok {
		return &pluginpb.RunHookResponse{Error: &pluginpb.Error{Code: CodeNotFound, Message: fmt.Sprintf("no hook %q", req.GetHook())}}, nil
	}
	reply, err := h.Run(ctx, req.GetInput())
	if err != nil {
		return &pluginpb.RunHookResponse{Error: &pluginpb.Error{Code: CodeOf(err), Message: TruncateOutput(err.Error(), maxErrorMessage)}}, nil
	}
	return &pluginpb.RunHookResponse{Reply: reply}, nil
}

// Plugin is what a plugin serves: its tools and its hooks. Serve(tools...)
// is Plugin{Tools: tools}.Serve().
type Plugin struct {
	Tools []*Tool
	Hooks []*Hook
	// Memory, when set, makes the plugin a memory provider
	// (MemoryProvider; docs/memory.md).
	Memory MemoryProvider
}

// Serve serves the plugin's tools and hooks as Serve does: it never
// returns.
func (p Plugin) Serve() { os.Exit(servePlugin(p)) }

// RegisterHooks adds the hook service for hooks to s (sdktest uses it).
func RegisterHooks(s grpc.ServiceRegistrar, hooks ...*Hook) error {
	svc, err := newHookService(hooks)
	if err != nil {
		return err
	}
	pluginpb.RegisterHooksServer(s, svc)
	return nil
}
