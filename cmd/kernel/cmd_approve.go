package main

import (
	"context"

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
		events := fs.String("events", "", "also write every event as a JSON line to `FILE` (- for stderr)")
		pos, err := parseArgs(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			fs.Usage()
			return exitError{code: 2, msg: name + " needs exactly one session id"}
		}
		return withKernel(ctx, &cf, env, *events, false, func(k *kernel.Kernel) (*kernel.RunResult, error) {
			return k.Resolve(ctx, pos[0], approve, *note)
		})
	}
}
