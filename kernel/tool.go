package kernel

import (
	"context"

	"github.com/agentkernel/agentkernel/tool"
)

// The tool contract lives in package tool, which plugins import without
// linking the kernel; these are its names as the kernel has always spelt
// them.

// Tier says how much harm a tool can do (tool.Tier). The loop runs
// contiguous read-only calls concurrently and every other call alone, in
// document order.
type Tier = tool.Tier

// The tiers. A tool must declare one; there is no default.
const (
	TierReadOnly      = tool.TierReadOnly
	TierSideEffecting = tool.TierSideEffecting
	TierPrivileged    = tool.TierPrivileged
)

// ToolSpec describes a tool to the model and to the kernel (tool.Spec).
type ToolSpec = tool.Spec

// Result is what a tool hands back (tool.Result).
type Result = tool.Result

// Tool is a callable tool (tool.Tool). Call receives arguments that have
// already been parsed and validated against Spec().Schema, and a context
// that carries the call's deadline and the run's cancellation; a Tool must
// return promptly once ctx is done. Implementations must be safe for
// concurrent use: read-only calls run in parallel.
type Tool = tool.Tool

// ToolFunc is the call half of a Tool as a function (tool.Func).
type ToolFunc = tool.Func

// NewTool makes a Tool from a spec and a function.
func NewTool(spec ToolSpec, fn ToolFunc) Tool { return tool.New(spec, fn) }

// WithProgress returns a context whose ReportProgress calls go to fn. The
// kernel installs one for every tool call; tests and plugin hosts may install
// their own.
func WithProgress(ctx context.Context, fn func(text string)) context.Context {
	return tool.WithProgress(ctx, fn)
}

// ReportProgress tells whoever runs the tool how a long call is going. It
// becomes a tool.progress event. Without a receiver it does nothing.
func ReportProgress(ctx context.Context, text string) { tool.ReportProgress(ctx, text) }
