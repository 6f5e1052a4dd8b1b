package kernel

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
)

// errPanicked marks a call whose hook or tool panicked (ToolError code
// "panic"). The kernel turns the panic into an error result for that call
// (the stack goes to the event stream as an error notice) and the run
// continues.
var errPanicked = errors.New("panicked")

// handle runs c through the hook chain and the core, turning a panic
// anywhere in them into an error result for this call. It runs on the
// loop's goroutine or on one of a read-only batch's goroutines: a panic must
// not end the process on either.
func (k *Kernel) handle(ctx context.Context, c *Call) (res Result, err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		stack := debug.Stack()
		k.emitIf(func() Event {
			return Notice{Source: "kernel", Level: "error",
				Text: fmt.Sprintf("call %s (%s) panicked: %v\n%s", c.id, c.spec.Name, v, stack)}
		})
		err = &ToolError{Tool: c.spec.Name, Code: "panic", Err: fmt.Errorf("%w: %v", errPanicked, v)}
		res = Result{Content: "error: the call failed inside the kernel (a hook or the tool panicked); it was not completed", IsError: true}
	}()
	return k.chain.Handle(ctx, c)
}
