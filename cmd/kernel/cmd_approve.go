package main

import (
	"context"
	"fmt"

	"github.com/agentkernel/agentkernel/kernel"
)

// cmdResolve is `kernel approve` and `kernel reject`: it resolves a
// session's pending approval and, on approval, continues the run.
func cmdResolve(approve bool) func(context.Context, []string, *cliEnv) error {
	name := "reject"
	if approve {
		name = "approve"
	}
	return func(ctx context.Context, args []string, env *cliEnv) error {
		fs := newFlagSet(name, "SESSION", env.stderr)
		var cf commonFlags
		cf.register(fs)
		note := fs.String("note", "", "a note recorded with the decision")
		accept := fs.Bool("accept-changed", false, "resume even if a file the session recorded (configuration, policy, script) changed, or its workspace path now leads to another directory")
		yes := fs.Bool("yes", false, "approve without showing the call and asking (for scripts)")
		events := fs.String("events", "", "also write every event as a JSON line to `FILE` (- for stderr)")
		pos, err := parseArgs(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			fs.Usage()
			return exitError{code: 2, msg: name + " needs exactly one session id"}
		}
		if err := cf.resume(ctx, pos[0], *accept, env.stderr); err != nil {
			return err
		}
		s, err := cf.loadSession(ctx, pos[0])
		if err != nil {
			return err
		}
		if s != nil && s.Pending == nil {
			return fmt.Errorf("session %s: %w", pos[0], kernel.ErrNoApproval)
		}
		return withKernel(ctx, &cf, env, *events, false, pos[0], func(k *kernel.Kernel) (*kernel.RunResult, error) {
			// Shown with the kernel built: the preview is the session's
			// tool's own, on the workspace the call will write.
			if s != nil && !*yes {
				fmt.Fprintf(env.stderr, "session %s is waiting for approval:\n%s", pos[0], describeApproval(ctx, s.Pending, &s.Meta, k.Tools()))
				if approve && !confirm(env.stdin, env.stderr, "run this call?") {
					return nil, exitError{code: 1, msg: "not approved: nothing ran (answer y, or pass --yes in scripts)"}
				}
			}
			return k.Resolve(ctx, pos[0], approve, *note)
		})
	}
}
