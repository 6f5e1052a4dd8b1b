// Command kernel runs LLM agents: the agentkernel turn loop with tools from
// built-ins, subprocess plugins and WASM modules, policy in YAML, hooks
// around every tool call, and sessions that survive a crash.
//
// Run `kernel help` for the commands.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentkernel/agentkernel/sandbox"
)

func main() {
	// First: when this binary was re-executed as a sandbox's launcher, this
	// confines itself and runs the tool's program instead of the CLI.
	sandbox.Main()
	ctx, stop := context.Background(), func() {}
	if len(os.Args) < 2 || os.Args[1] != "chat" { // chat handles Ctrl-C per turn
		ctx, stop = interruptContext(ctx, os.Stderr)
	}
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	code, msg := exitStatus(err)
	if msg != "" {
		fmt.Fprintln(os.Stderr, "kernel: "+msg)
	}
	os.Exit(code)
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
	// spans, when set, receives the spans instead of the exporter the
	// configuration names (tests).
	spans sdktrace.SpanExporter
}

func commands() []command {
	return []command{
		{"run", "run one prompt to a final answer", cmdRun},
		{"chat", "talk to the agent interactively", cmdChat},
		{"sessions", "list, show, export, import and remove sessions", cmdSessions},
		{"policy", "check, test, explain and replay policies", cmdPolicy},
		{"steer", "queue a message for a running session, list or cancel queued ones", cmdSteer},
		{"serve", "serve the kernel over HTTP: sessions, runs, live events, approvals", cmdServe},
		{"keys", "create, list and revoke kernel serve's API keys", cmdKeys},
		{"store", "migrate the PostgreSQL schema; copy sessions between stores", cmdStore},
		{"approve", "approve a session's pending tool call and continue", cmdResolve(true)},
		{"reject", "reject a session's pending tool call", cmdResolve(false)},
		{"tools", "list the tools the model can call", cmdTools},
		{"plugins", "verify the configured plugins (pins, handshake, tools); lock a script plugin's directory", cmdPlugins},
		{"mcp", "list MCP servers and their tools; serve the kernel's tools over MCP", cmdMCP},
		{"sandbox", "show which sandbox layers hold here and what each native tool gets", cmdSandbox},
		{"version", "print the version", cmdVersion},
		{"init", "write a commented kernel.yaml and a starter policy", cmdInit},
		{"config", "show the configuration files in effect and the result", cmdConfig},
		{"completion", "print shell completion for bash, zsh or fish", cmdCompletion},
		{"help", "show the commands, or one command's flags", cmdHelp},
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return runEnv(ctx, args, &cliEnv{stdin: stdin, stdout: stdout, stderr: stderr})
}

// runEnv runs the command args names with env.
func runEnv(ctx context.Context, args []string, env *cliEnv) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		usage(env.stdout)
		return nil
	}
	if args[0] == "--version" || args[0] == "-version" {
		return cmdVersion(ctx, args[1:], env)
	}
	c, ok := findCommand(args[0])
	if !ok {
		return usageError("unknown command %q (kernel help lists them)", args[0])
	}
	if helpRequested(args[1:]) {
		env.stderr = env.stdout // asked-for help is output, not a diagnostic
	}
	return scrubError(c.run(ctx, args[1:], env))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "kernel — the agentkernel CLI\n\nUsage: kernel COMMAND [flags] [args]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun `kernel help COMMAND` (or `kernel COMMAND --help`) for a command's flags.\nExit status: 0 success, 1 failure, 2 usage error, 130 interrupted (README.md).")
}

// errorText is a failure's message for stderr: an error made of several
// problems keeps one per line (with their caret lines), not run together.
func errorText(err error) string {
	return strings.TrimRight(err.Error(), "\n")
}

// oneLine flattens an error for a one-line message (chat, events).
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}
