package kernel

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentkernel/agentkernel/tool"
)

// Interrupted side effects, made knowable. A round's tool calls are stored
// with the assistant message that makes them, before any of them runs,
// and each side-effecting call's intent is stored right before it runs
// (intent.go). When the kernel stopped before a call returned, repair
// answers it: a side-effecting call without an intent did not run; one
// with an intent may have run, and a tool that can tell whether a call
// with those arguments ran implements SideEffectChecker, and the result
// then says "completed before the crash" instead of "may or may not have
// run" (Interrupted). For a round a kernel stored before intents existed,
// the checker may also say "did not run". Any Tool may implement it: the built-in write_file
// and edit_file do, and a subprocess plugin's tool does by asking the
// plugin, when its sdk.Spec sets CheckSideEffect. A tool without it keeps
// Interrupted.

// SideEffect is what a SideEffectChecker found out about an interrupted
// call (tool.SideEffect).
type SideEffect = tool.SideEffect

// The answers of a SideEffectChecker.
const (
	SideEffectUnknown   = tool.SideEffectUnknown
	SideEffectCompleted = tool.SideEffectCompleted
	SideEffectNotRun    = tool.SideEffectNotRun
)

// SideEffectChecker is an optional interface of a Tool
// (tool.SideEffectChecker): CheckSideEffect tells whether a call with args,
// intended at since (when the round started), completed.
type SideEffectChecker = tool.SideEffectChecker

// The results repair gives an interrupted call whose outcome is known.
const (
	InterruptedCompleted = "interrupted: the kernel stopped before this call returned a result, but it completed before the crash: "
	InterruptedNotRun    = "interrupted: the kernel stopped before this call ran; it did not run (run it again if it is still needed): "
)

// interruptedResult is the result repair stores for call c of a round
// that started at since: Interrupted, unless the tool can tell. When the
// call's intent was recorded (started), the tool may say it completed but
// never that it did not run: the owner that recorded the intent may be
// paused before the effect and run it late.
func (k *Kernel) interruptedResult(ctx context.Context, c ToolCall, since time.Time, started bool) string {
	t, ok := k.cfg.Tools.Lookup(c.Name)
	if !ok {
		return Interrupted
	}
	oc, ok := t.(SideEffectChecker)
	if !ok {
		return Interrupted
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	switch e, detail := oc.CheckSideEffect(ctx, json.RawMessage(c.Arguments), since); e {
	case SideEffectCompleted:
		return InterruptedCompleted + detail
	case SideEffectNotRun:
		if !started {
			return InterruptedNotRun + detail
		}
	}
	return Interrupted
}
