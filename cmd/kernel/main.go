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

// command is one entry of the command table: a command that parses its
// own flags (run), or a group of subcommands (group; run is its run).
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, env *cliEnv) error
	group   *group
}

// grouped is the command table entry of a group of subcommands.
func grouped(g *group, summary string) command {
	return command{name: g.name, summary: summary, run: g.run, group: g}
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
		{name: "run", summary: "run one prompt to a final answer", run: cmdRun},
		{name: "chat", summary: "talk to the agent interactively", run: cmdChat},
		grouped(&sessionsGroup, "list, show, export, import and remove sessions"),
		grouped(&memoryGroup, "search what earlier sessions said; the memory index's status; reindex"),
		grouped(&agentsGroup, "list and show the configured agents and pipelines"),
		grouped(&policyGroup, "check, test, explain and replay policies"),
		{name: "steer", summary: "queue a message for a running session, list or cancel queued ones", run: cmdSteer},
		{name: "serve", summary: "serve the kernel over HTTP: sessions, runs, live events, approvals", run: cmdServe},
		grouped(&keysGroup, "create, list and revoke kernel serve's API keys"),
		grouped(&storeGroup, "migrate the PostgreSQL schema; copy sessions between stores"),
		{name: "approve", summary: "approve a session's pending tool call and continue", run: cmdResolve(true)},
		{name: "reject", summary: "reject a session's pending tool call", run: cmdResolve(false)},
		grouped(&toolsGroup, "list the tools the model can call; import tools from an OpenAPI document"),
		grouped(&pluginsGroup, "verify the configured plugins (pins, handshake, tools); lock a script plugin's directory"),
		grouped(&mcpGroup, "list MCP servers and their tools; serve the kernel's tools over MCP"),
		grouped(&sandboxGroup, "show which sandbox layers hold here and what each native tool gets"),
		{name: "version", summary: "print the version", run: cmdVersion},
		{name: "init", summary: "write a commented kernel.yaml and a starter policy", run: cmdInit},
		grouped(&configGroup, "show the configuration files in effect and the result"),
		{name: "completion", summary: "print shell completion for bash, zsh or fish", run: cmdCompletion},
		{name: "help", summary: "show the commands, or one command's flags", run: cmdHelp},
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
