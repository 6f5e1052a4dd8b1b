package sdk

import (
	"context"
	"os/exec"
	"time"
)

// Command returns an exec.Cmd for a child process a tool runs. The child is
// killed when ctx is done (with a one-second grace for its output pipes)
// and, on Linux, when the plugin process dies, even if the plugin is killed
// with SIGKILL. Children are in the plugin's process group, so the host
// kills them with the plugin in every other case; a child that moves to
// another process group or session escapes both.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = time.Second
	setParentDeathSignal(cmd)
	return cmd
}
