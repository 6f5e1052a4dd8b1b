package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/agentkernel/agentkernel/kernel"
)

func cmdRun(ctx context.Context, args []string, env *cliEnv) error {
	fs := newFlagSet("run", "PROMPT", env.stderr)
	var cf commonFlags
	cf.register(fs)
	session := fs.String("session", "", "continue the session `ID`")
	events := fs.String("events", "", "also write every event as a JSON line to `FILE` (- for stderr)")
	quiet := fs.Bool("quiet", false, "print only the answer")
	accept := fs.Bool("accept-changed", false, "with --session: resume even if a file the session recorded changed since it started")
	fs.StringVar(&cf.agent, "agent", "", "run the agent `NAME` (agents: in kernel.yaml; kernel agents lists them)")
	fs.StringVar(&cf.pipeline, "pipeline", "", "run the pipeline `NAME` with the prompt as its input (pipelines: in kernel.yaml)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	prompt := strings.TrimSpace(strings.Join(pos, " "))
	if prompt == "-" {
		b, err := io.ReadAll(env.stdin)
		if err != nil {
			return fmt.Errorf("read prompt from stdin: %w", err)
		}
		prompt = strings.TrimSpace(string(b))
	}
	if prompt == "" {
		fs.Usage()
		return exitError{code: 2, msg: "run needs a prompt (or - to read it from stdin)"}
	}
	if cf.agent != "" && cf.pipeline != "" {
		return usageError("--agent and --pipeline: a run is one or the other")
	}
	if *session != "" && (cf.agent != "" || cf.pipeline != "") {
		return usageError("--session continues a session with the agent or pipeline it records: drop --agent and --pipeline")
	}
	if *session != "" {
		if err := cf.resume(ctx, *session, *accept, env.stderr); err != nil {
			return err
		}
	}
	return withKernel(ctx, &cf, env, *events, *quiet, *session, func(k *kernel.Kernel) (*kernel.RunResult, error) {
		return k.Run(ctx, *session, prompt)
	})
}

// runOutcome maps a run's end to the exit status: 0 for completed,
// max_turns, budget and awaiting_approval; 130 for cancelled; 1 for errors.
func runOutcome(res *kernel.RunResult, err error) error {
	if res != nil && res.StopReason == kernel.StopCancelled {
		return exitError{code: 130, msg: "cancelled; the session keeps everything up to the cancellation"}
	}
	if err != nil {
		return err
	}
	return nil
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
