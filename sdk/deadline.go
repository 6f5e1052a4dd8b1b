package sdk

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc/metadata"
)

// DeadlineMetadata is the gRPC metadata key under which the kernel sends a
// call's deadline as an absolute time, in Unix milliseconds. grpc itself
// sends a duration (grpc-timeout), which the plugin counts from when it
// reads the call: on a loaded machine that is later than the kernel
// counted from, and the kernel's cancellation at its deadline then reaches
// the plugin before the plugin's own deadline. The absolute deadline lets
// every SDK tell a deadline from a cancellation.
const DeadlineMetadata = "agentkernel-deadline-ms"

// deadlineSkew is how close to its deadline a cancelled call is taken to
// have ended by it (the kernel cancels at its deadline, never before).
const deadlineSkew = 5 * time.Millisecond

// withKernelDeadline bounds ctx by the kernel's absolute deadline when
// the call's metadata carries one earlier than grpc's.
func withKernelDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(DeadlineMetadata)
	if len(v) == 0 {
		return ctx, func() {}
	}
	ms, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil {
		return ctx, func() {}
	}
	at := time.UnixMilli(ms)
	if dl, ok := ctx.Deadline(); ok && !at.Before(dl) {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, at)
}

// endedByDeadline reports whether a call whose ctx ended did so by its
// deadline: its context says so, or it was cancelled at (or after) its
// deadline, which is how the kernel's deadline reaches the plugin.
func endedByDeadline(ctx context.Context) bool {
	err := ctx.Err()
	if err == nil {
		return false
	}
	if err == context.DeadlineExceeded {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl.Add(-deadlineSkew))
}
