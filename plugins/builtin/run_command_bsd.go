//go:build unix && !linux

package builtin

import (
	"context"
	"os"
)

// waitAndKillGroup waits until p exits or ctx is done, then kills p's whole
// process group.
func waitAndKillGroup(ctx context.Context, p *os.Process) (*os.ProcessState, error) {
	return reapThenKill(ctx, p)
}
