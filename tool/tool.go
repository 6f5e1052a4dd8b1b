package tool

import (
	"context"
	"encoding/json"
	"slices"
	"time"
)

// Tier says how much harm a tool can do. The kernel runs contiguous
// read-only calls concurrently and every other call alone, in document
// order; policy can ask a human before a privileged call.
type Tier string

// The tiers. A tool must declare one; there is no default.
const (
	TierReadOnly      Tier = "read_only"
	TierSideEffecting Tier = "side_effecting"
	TierPrivileged    Tier = "privileged"
)

// tiers is every Tier, least harm first. It is the one list: the schemas
// and the docs that name the tiers are held to it by tests
// (docs/architecture.md, "Closed sets").
var tiers = []Tier{TierReadOnly, TierSideEffecting, TierPrivileged}

// Tiers returns every Tier, least harm first.
func Tiers() []Tier { return slices.Clone(tiers) }

// Valid reports whether t is one of the tiers.
func (t Tier) Valid() bool { return slices.Contains(tiers, t) }

// Spec describes a tool to the model and to the kernel.
type Spec struct {
	// Name is what the model calls. 1–64 characters of [A-Za-z0-9_.-];
	// tools from plugins are namespaced "plugin.tool".
	Name        string `json:"name"`
	Description string `json:"description"`
	// Schema is the JSON Schema of the arguments, an object schema. Empty
	// means {"type":"object"}.
	Schema json.RawMessage `json:"schema,omitempty"`
	Tier   Tier            `json:"tier"`
	Tags   []string        `json:"tags,omitempty"`
	// Timeout bounds one call; zero means the kernel's default.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Source says where the tool comes from: "builtin", "subprocess:<plugin>",
	// "wasm:<module>" or "mcp:<server>".
	Source string `json:"source"`
}

// Result is what a tool hands back. Content is the text the model reads.
type Result struct {
	Content string `json:"content"`
	// IsError marks a result that reports a failure the model should see as
	// one. A tool that returns a non-nil error gets IsError set for it.
	IsError bool `json:"is_error,omitempty"`
}

// Tool is a callable tool. Call receives arguments that have already been
// parsed and validated against Spec().Schema, and a context that carries the
// call's deadline and the run's cancellation; a Tool must return promptly once
// ctx is done. Implementations must be safe for concurrent use: read-only
// calls run in parallel.
type Tool interface {
	Spec() Spec
	Call(ctx context.Context, args json.RawMessage) (Result, error)
}

// Func is the call half of a Tool as a function.
type Func func(ctx context.Context, args json.RawMessage) (Result, error)

// New makes a Tool from a spec and a function.
func New(spec Spec, fn Func) Tool { return funcTool{spec: spec, fn: fn} }

type funcTool struct {
	spec Spec
	fn   Func
}

func (t funcTool) Spec() Spec { return t.spec }
func (t funcTool) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	return t.fn(ctx, args)
}

var _ Tool = funcTool{}
