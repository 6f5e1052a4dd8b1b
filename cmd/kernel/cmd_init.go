package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// initConfigYAML is the kernel.yaml `kernel init` writes: the model
// section (initModels), then the workspace line.
const initConfigYAML = `# kernel.yaml — written by ` + "`kernel init`" + `. Every field is optional: what
# this file leaves out comes from the embedded defaults (` + "`kernel config show`" + `
# prints the result). The schema: schemas/config.schema.json in the
# agentkernel repository. Relative paths are relative to this file.
#
# This file and the policy beside it are kept OUTSIDE the workspace, so
# the agent's own tools can never rewrite the rules it runs under.

%s
# The only directory the built-in tools can reach.
%s

limits:
  max_turns: 8                  # model turns per run
  tool_timeout: 2m              # a tool call whose tool sets no timeout
  approval_ttl: 24h             # how long a call may wait for ` + "`kernel approve`" + `

tools:
  builtin:
    # read_file, list_dir and search only read; write_file, edit_file and
    # run_command change things, and the policy asks before they run.
    enable: [read_file, list_dir, search, write_file, edit_file, run_command]

policy:
  file: policy.yaml             # see docs/policy.md; reloaded when it changes

# store:
#   dir: ~/.local/share/agentkernel   # sessions (the default)

# telemetry:                    # off by default; OTEL_EXPORTER_OTLP_ENDPOINT turns traces on too
#   traces: {endpoint: http://127.0.0.1:4318}   # OTLP; see docs/observability.md
#   metrics: {listen: 127.0.0.1:9464}          # Prometheus /metrics while the kernel runs
`

// initModels are the model sections `kernel init --provider` writes, and
// the variable each needs.
var initModels = map[string]struct{ yaml, keyEnv string }{
	"openai": {`model:
  provider: openai              # openai (any OpenAI-compatible server), anthropic or scripted
  name: gpt-4o-mini
  # base_url: http://127.0.0.1:11434/v1   # Ollama, vLLM, llama.cpp, LM Studio...
  api_key_env: OPENAI_API_KEY   # the variable's NAME; the key never goes in a file
  timeout: 5m                   # one model call
  # tool_protocol: auto         # a local model without tool calling: see docs/providers.md
`, "OPENAI_API_KEY"},
	"anthropic": {`model:
  provider: anthropic           # Anthropic's Messages API (Claude); see docs/providers.md
  name: claude-sonnet-4-5
  api_key_env: ANTHROPIC_API_KEY   # the variable's NAME; the key never goes in a file
  timeout: 5m                   # one model call
  # max_tokens: 16000           # default: the catalog's max_output for the model
  thinking:                     # extended thinking; its signed blocks are kept and sent back exactly
    type: enabled
    budget_tokens: 8000         # at least 1024, less than max_tokens
  # cache: auto                 # prompt-cache breakpoints on tools, system prompt, summary, latest turns
  # fallbacks: [claude-haiku-4-5]
`, "ANTHROPIC_API_KEY"},
}

// initPolicyYAML is the starter policy: everything that reads is allowed,
// everything that changes waits for a human, recursive deletion is denied.
const initPolicyYAML = `# policy.yaml — the starter policy written by ` + "`kernel init`" + `.
# Reading is allowed; every tool that can change something (writes, edits,
# commands, and any plugin or MCP tool not marked read_only) waits for your
# approval (` + "`kernel approve SESSION`" + `); recursive forced deletion is refused.
# Check it with ` + "`kernel policy check policy.yaml`" + ` and run its tests with
# ` + "`kernel policy test policy.yaml`" + `. The format: docs/policy.md.
name: starter
revision: "1"

defaults:
  tool_call: allow

rules:
  - id: no-rm-rf
    description: recursive forced deletion
    effect: deny
    tools: [run_command]
    when: call.command matches ` + "`(^|[\\s;&|])rm\\s+-[a-zA-Z]*([rR][a-zA-Z]*f|f[a-zA-Z]*[rR])`" + `
    message: '"destructive command refused: " + call.command'

  - id: ask-before-changes
    description: every tool that is not read-only waits for a human
    effect: ask
    when: tool.tier != "read_only"
    message: '"the agent wants to run " + tool.name + " (" + tool.tier + ")"'

tests:
  - name: reading is allowed
    input:
      call: {tool: read_file, args: {path: README.md}}
    expect: {decision: allow}
  - name: a write waits for approval
    input:
      call: {tool: write_file, args: {path: notes.txt, content: hi}}
    expect: {decision: ask, rules: [ask-before-changes]}
  - name: an MCP server's tool without a read_only tier waits too
    input:
      call: {tool: fs.write_file, args: {path: notes.txt, content: hi}}
      tool: {tier: side_effecting}
    expect: {decision: ask, rules: [ask-before-changes]}
  - name: rm -rf is refused
    input:
      call: {tool: run_command, args: {argv: [rm, -rf, build]}}
    expect: {decision: deny, rules: [no-rm-rf]}
`

// initScriptYAML is the offline first run `kernel init` writes beside the
// configuration: a scripted model (docs/scripted.md) that lists the
// workspace and answers, so the kernel, its tools, the policy and the
// session store can be tried before any model or key is set up. It works
// on any workspace and only reads.
const initScriptYAML = `# hello.yaml — an offline first run, written by ` + "`kernel init`" + `. A scripted
# model plays the LLM (docs/scripted.md): no model is called, no key is
# needed, and the run is labelled "scripted" and costs nothing. The tools,
# the policy, the hooks and the session store are the real ones.
#
#   kernel run --script hello.yaml "What is in this directory?"
turns:
  - text: "Let me look at the workspace first."
    tool_calls:
      - name: list_dir
        args: {path: "."}

  - match: {role: tool}
    text: |
      I listed the workspace with the list_dir tool: the kernel offered the
      tool, the policy allowed the call (it only reads), and the result came
      back through the hooks and into the session store.
      This answer comes from a script: no model was called. Set up a real
      model next (the kernel.yaml beside this file says how).
`

// cmdInit is `kernel init`: a commented kernel.yaml and a starter policy,
// written outside the workspace.
func cmdInit(_ context.Context, args []string, env *cliEnv) error {
	flags := newFlagSet("init", "", env.stderr)
	dir := flags.String("dir", "", "where to write kernel.yaml, policy.yaml and hello.yaml (`DIR`; default the user's config directory, $XDG_CONFIG_HOME/agentkernel)")
	workspace := flags.String("workspace", "", "the workspace `DIR` to write into kernel.yaml (default: none, so each run uses its working directory)")
	force := flags.Bool("force", false, "overwrite existing files")
	provider := flags.String("provider", "openai", "the model API the configuration uses: `openai` or anthropic")
	pos, err := parseArgs(flags, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("init takes no arguments (use --dir and --workspace), got %q", pos[0])
	}
	model, ok := initModels[*provider]
	if !ok {
		return usageError("init --provider %q: want openai or anthropic", *provider)
	}
	target := *dir
	if target == "" {
		base, err := userConfigDir()
		if err != nil {
			return fmt.Errorf("find the user's config directory: %w (use --dir)", err)
		}
		target = filepath.Join(base, "agentkernel")
	}
	target = absPath(target)
	wsLine := "# workspace: /path/to/project   # default: the directory you run kernel in"
	ws := ""
	if *workspace != "" {
		ws = absPath(*workspace)
		if st, err := os.Stat(ws); err != nil || !st.IsDir() {
			return fmt.Errorf("--workspace %s: not a directory", ws)
		}
		wsLine = "workspace: " + yamlQuote(ws)
	} else if *dir != "" {
		// A project-level config: the workspace is the working directory
		// at init time, which must not contain the config.
		ws, _ = os.Getwd()
	}
	if ws != "" && within(target, ws) {
		return usageError("refusing to write %s inside the workspace %s: the agent's tools could rewrite its own configuration; use a --dir outside it", target, ws)
	}
	files := []struct{ name, text string }{
		{"kernel.yaml", fmt.Sprintf(initConfigYAML, model.yaml, wsLine)},
		{"policy.yaml", initPolicyYAML},
		{"hello.yaml", initScriptYAML},
	}
	if !*force {
		for _, f := range files {
			p := filepath.Join(target, f.name)
			if _, err := os.Stat(p); err == nil {
				return fmt.Errorf("%s exists; keep it, or run kernel init --force to overwrite it", p)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	if err := os.MkdirAll(target, 0o700); err != nil {
		return err
	}
	for _, f := range files {
		p := filepath.Join(target, f.name)
		if err := writePrivateFile(p, []byte(f.text)); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "wrote %s\n", p)
	}
	fmt.Fprint(env.stderr, initNext(target, *dir != "", model.keyEnv))
	return nil
}

// initNext is what init prints after writing the files: the offline first
// run, then what a real model needs. withConfig: the files are not where
// the kernel looks by itself (--dir), so each command names kernel.yaml.
func initNext(target string, withConfig bool, keyEnv string) string {
	cfg := ""
	if withConfig {
		cfg = " --config " + shellQuote(filepath.Join(target, "kernel.yaml"))
	}
	return fmt.Sprintf(`next: try it offline, no model and no key needed (a scripted model plays the LLM; the run is labelled scripted and costs nothing):
        kernel run%s --script %s "What is in this directory?"
      then, with a real model (kernel.yaml says which):
        export %s=...
        kernel config show%s
        kernel run%s "..."
`, cfg, shellQuote(filepath.Join(target, "hello.yaml")), keyEnv, cfg, cfg)
}

// yamlQuote quotes a path for a YAML scalar.
func yamlQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
