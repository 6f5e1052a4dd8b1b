// Package faults marks the points of the kernel where a crash test stops
// or kills the process: between recording a side effect's intent and
// running it, in a taking-over replica's first model call, at each step
// of taking a queued follow-up. At names a point; it does nothing unless a
// test installed a hook with Set, and only tests do (cmd/kernel's
// TestMain, from an environment variable of the test binary acting as the
// CLI):
// no configuration, flag or variable of the kernel reaches it.
// TestOnlyTestsSetFaults holds that to the tree.
package faults

import "sync/atomic"

// The points At is called with.
const (
	// ToolRun is right before a tool call runs, after its intent is
	// stored (arg: the tool's name).
	ToolRun = "tool.run"
	// ModelCall is right before a model is called (arg: the model).
	ModelCall = "model.call"
	// RunEnd is right after a kernel serve run ended, before its end is
	// recorded (arg: the session).
	RunEnd = "run.end"
	// FollowUpTaken is right after a follow-up is taken from the queue,
	// before its run starts (arg: the session).
	FollowUpTaken = "followup.taken"
	// FollowUpStored is right after a follow-up's prompt is stored, before
	// the queue is told (arg: the session).
	FollowUpStored = "followup.stored"
	// FollowUpDelivered is right after the queue is told a follow-up is
	// delivered (arg: the session).
	FollowUpDelivered = "followup.delivered"
)

var hook atomic.Pointer[func(point, arg string)]

// At calls the installed hook, if any, with point and arg.
func At(point, arg string) {
	if h := hook.Load(); h != nil {
		(*h)(point, arg)
	}
}

// Set installs fn as the hook (nil removes it). Tests only.
func Set(fn func(point, arg string)) {
	if fn == nil {
		hook.Store(nil)
		return
	}
	hook.Store(&fn)
}
