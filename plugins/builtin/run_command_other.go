//go:build !unix

package builtin

import (
	"context"
	"os"
	"syscall"
)

// oNonblock is not needed where there are no FIFOs to open.
const oNonblock = 0

// groupAttr is nil: without process groups only the program itself is
// killed, not the processes it started.
func groupAttr() *syscall.SysProcAttr { return nil }

// waitAndKillGroup waits until p exits or ctx is done; on ctx it kills p.
func waitAndKillGroup(ctx context.Context, p *os.Process) (*os.ProcessState, error) {
	type waited struct {
		st  *os.ProcessState
		err error
	}
	ch := make(chan waited, 1)
	go func() {
		st, err := p.Wait()
		ch <- waited{st, err}
	}()
	select {
	case w := <-ch:
		return w.st, w.err
	case <-ctx.Done():
		_ = p.Kill()
		w := <-ch
		return w.st, w.err
	}
}
