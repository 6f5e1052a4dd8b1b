// Command kernel runs LLM agents: the agentkernel turn loop with tools from
// built-ins, subprocess plugins and WASM modules, policy in YAML, hooks
// around every tool call, and sessions that survive a crash.
//
// Run `kernel help` for the commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	ctx, stop := context.Background(), func() {}
	if len(os.Args) < 2 || os.Args[1] != "chat" { // chat handles Ctrl-C per turn
		ctx, stop = interruptContext(ctx, os.Stderr)
	}
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(os.Stderr, "kernel: "+ee.msg)
			}
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "kernel: "+oneLine(err))
		os.Exit(1)
	}
}

// exitError ends the program with a specific code.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return fmt.Sprintf("exit %d: %s", e.code, e.msg) }

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, env *cliEnv) error
}

// cliEnv is what every command gets: its streams.
type cliEnv struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

func commands() []command {
	return []command{
		{"run", "run one prompt to a final answer", cmdRun},
		{"chat", "talk to the agent interactively", cmdChat},
		{"sessions", "list, show, export, import and remove sessions", cmdSessions},
		{"policy", "check, test, explain and replay policies", cmdPolicy},
		{"steer", "queue a message for a running session, list or cancel queued ones", cmdSteer},
		{"approve", "approve a session's pending tool call and continue", cmdResolve(true)},
		{"reject", "reject a session's pending tool call", cmdResolve(false)},
		{"tools", "list the tools the model can call", cmdTools},
		{"plugins", "verify the configured plugins (pins, handshake, tools)", cmdPlugins},
		{"mcp", "list MCP servers and their tools; serve the kernel's tools over MCP", cmdMCP},
		{"version", "print the version", cmdVersion},
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	env := &cliEnv{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return scrubError(c.run(ctx, args[1:], env))
		}
	}
	usage(stderr)
	return fmt.Errorf("unknown command %q", args[0])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "kernel — the agentkernel CLI\n\nUsage: kernel COMMAND [flags] [args]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun `kernel COMMAND -h` for a command's flags. See README.md for the configuration.")
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func cmdVersion(_ context.Context, _ []string, env *cliEnv) error {
	fmt.Fprintln(env.stdout, "kernel", version)
	return nil
}

// oneLine flattens an error for the one-line failure message.
func oneLine(err error) string {
	s := err.Error()
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, ';', ' ')
			continue
		}
		out = append(out, s[i])
	}
	return string(out)
}
