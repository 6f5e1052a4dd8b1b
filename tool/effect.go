package tool

import (
	"context"
	"encoding/json"
	"time"
)

// SideEffect is what a SideEffectChecker found out about an interrupted call.
type SideEffect int

const (
	// SideEffectUnknown: the tool cannot tell (the result says the call may
	// or may not have run).
	SideEffectUnknown SideEffect = iota
	// SideEffectCompleted: the call's effect is in place.
	SideEffectCompleted
	// SideEffectNotRun: the call's effect is absent and nothing it would have
	// touched changed since the round started.
	SideEffectNotRun
)

// SideEffectChecker is an optional interface of a Tool: CheckSideEffect tells
// whether a call with args, intended at since (when the round started),
// completed. It must only read, and must answer SideEffectUnknown unless it
// is sure; detail says what it checked ("docs/a.md has the 120 bytes the
// call writes (sha256 …)").
type SideEffectChecker interface {
	CheckSideEffect(ctx context.Context, args json.RawMessage, since time.Time) (e SideEffect, detail string)
}
