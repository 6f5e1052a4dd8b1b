package tool

import "context"

// QueueKey is the context key of a tool call's Queuer. The kernel's call
// contexts answer Value(QueueKey{}) themselves.
type QueueKey struct{}

// A Queuer runs tool calls and bounds the time they wait in line inside a
// tool (for a call slot, a module's compilation, a memory budget, a fresh
// instance) by a limit of its own, apart from the tool's timeout.
type Queuer interface {
	// Queued says the call waits in the tool's queues from now on: until
	// Started, its deadline is the host's limit for waiting in line.
	Queued()
	// Started says the tool's own work begins now: the call's timeout
	// counts from here.
	Started()
}

// Queue tells whoever runs the tool that the call now waits in the tool's
// own queues, which are the host's, not the tool's, time: until start is
// called the call's deadline is the host's limit for waiting in line
// (the kernel's limits.tool_queue_timeout) instead of the tool's timeout,
// and start begins the timeout. start may be called more than once; only
// the first call counts. Without a Queuer in ctx both do nothing, and
// every wait counts against ctx's deadline.
func Queue(ctx context.Context) (start func()) {
	q, ok := ctx.Value(QueueKey{}).(Queuer)
	if !ok {
		return func() {}
	}
	q.Queued()
	started := false
	return func() {
		if !started {
			started = true
			q.Started()
		}
	}
}
