package hooks

import (
	"errors"
	"strings"
	"testing"
)

func TestConfigErrorsNameHookAndField(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  string
		want []string // each must appear in the error
	}{
		{"no name", `rules: [{phase: before, block_when: "true"}]`, []string{"hooks.rules[0].name: is required"}},
		{"bad name", `rules: [{name: "has space", phase: before, block_when: "true"}]`, []string{`hook "has space": hooks.rules[0].name: must be 1-64 characters`}},
		{"reserved name", `rules: [{name: scrubber, redact: [x]}]`, []string{`hook "scrubber": hooks.rules[0].name: "scrubber" is the name of a built-in hook`}},
		{"duplicate", `rules: [{name: a, redact: [x]}, {name: a, redact: [y]}]`, []string{`hook "a": hooks.rules[1].name: duplicate: rules[0] has the same name`}},
		{"no kind", `rules: [{name: a, phase: before}]`, []string{`hook "a": hooks.rules[0]: a rule needs exactly one of command, plugin, block_when, set_context, set_args, redact, truncate; it has 0`}},
		{"two kinds", `rules: [{name: a, phase: before, block_when: "true", set_args: "{}"}]`, []string{`it has 2 [block_when set_args]`}},
		{"phase missing", `rules: [{name: a, block_when: "true"}]`, []string{`hook "a": hooks.rules[0].phase: is required for a block_when hook`}},
		{"phase wrong", `rules: [{name: a, phase: during, block_when: "true"}]`, []string{`hooks.rules[0].phase: must be a hook point ([run_start before_compact before_model after_model before after run_end]), got "during"`}},
		{"phase contradicts kind", `rules: [{name: a, phase: before, redact: [x]}]`, []string{`hooks.rules[0].phase: a redact hook works at [after run_start before_model after_model], not at before`}},
		{"kind not at point", `rules: [{name: a, phase: run_end, set_context: '"x"'}]`, []string{`hooks.rules[0].phase: a set_context hook works at [run_start before_model], not at run_end`}},
		{"set_args at a point", `rules: [{name: a, phase: after_model, set_args: '{}'}]`, []string{`hooks.rules[0].phase: a set_args hook works at [before], not at after_model`}},
		{"concurrent elsewhere", `rules: [{name: a, phase: after_model, concurrent: true, block_when: 'true'}]`, []string{`hooks.rules[0].concurrent: only a before_model command, plugin or block_when hook runs concurrently with the model call`}},
		{"concurrent redact", `rules: [{name: a, phase: before_model, concurrent: true, redact: [x]}]`, []string{`hooks.rules[0].concurrent: only a before_model command`}},
		{"set_context not a string", `rules: [{name: a, phase: before_model, set_context: '1 + 1'}]`, []string{`hooks.rules[0].set_context: compile "1 + 1": expected string`}},
		{"point expr typo", `rules: [{name: a, phase: after_model, block_when: 'txet contains "x"'}]`, []string{`hooks.rules[0].block_when: compile "txet contains \"x\"": unknown name txet`}},
		{"fail mode", `rules: [{name: a, phase: before, fail: maybe, block_when: "true"}]`, []string{`hooks.rules[0].fail: must be fail_closed or fail_open, got "maybe"`}},
		{"match does not compile", `rules: [{name: a, phase: before, match: 'tol == "x"', block_when: "true"}]`, []string{`hook "a": hooks.rules[0].match: compile "tol == \"x\"": unknown name tol`}},
		{"match not bool", `rules: [{name: a, phase: before, match: 'tool', block_when: "true"}]`, []string{`hooks.rules[0].match: compile "tool": expected bool, but got string`}},
		{"block_when", `rules: [{name: a, phase: before, block_when: "args +"}]`, []string{`hook "a": hooks.rules[0].block_when: compile`}},
		{"set_args not a map", `rules: [{name: a, set_args: '"text"'}]`, []string{`hook "a": hooks.rules[0].set_args: compile "\"text\"": expected map, but got string`}},
		{"redact regexp", `rules: [{name: a, redact: ["ok", "(unclosed"]}]`, []string{`hook "a": hooks.rules[0].redact[1]: invalid regular expression`}},
		{"redact empty", `rules: [{name: a, redact: []}]`, []string{`hooks.rules[0].redact: needs at least one pattern`}},
		{"redact matches empty", `rules: [{name: a, redact: ["x*"]}]`, []string{`hooks.rules[0].redact[0]: pattern "x*" matches the empty string`}},
		{"truncate", `rules: [{name: a, truncate: {head: -1, tail: 0}}]`, []string{`hook "a": hooks.rules[0].truncate: head and tail must not be negative`}},
		{"message on redact", `rules: [{name: a, redact: [x], message: hi}]`, []string{`hooks.rules[0].message: is only used by command, plugin and block_when hooks`}},
		{"command argv", `rules: [{name: a, phase: before, command: {argv: []}}]`, []string{`hook "a": hooks.rules[0].command.argv: needs at least the program`}},
		{"command missing program", `rules: [{name: a, phase: before, command: {argv: [./no/such/hook.sh]}}]`, []string{`hook "a": hooks.rules[0].command.argv[0]:`, "no such file"}},
		{"command not in PATH", `rules: [{name: a, phase: before, command: {argv: [no-such-hook-program-xyz]}}]`, []string{`hooks.rules[0].command.argv[0]: "no-such-hook-program-xyz" is not in PATH`}},
		{"command not executable", `rules: [{name: a, phase: before, command: {argv: [testdata/scrub_corpus.yaml]}}]`, []string{`is not executable (chmod +x it)`}},
		{"command timeout", `rules: [{name: a, phase: before, command: {argv: [../examples/hooks/block-rm.sh], timeout: 11m}}]`, []string{`hooks.rules[0].command.timeout: must be at most 10m0s, got 11m0s`}},
		{"command env", `rules: [{name: a, phase: before, command: {argv: [../examples/hooks/block-rm.sh], env: [PATH, "TOKEN=abc"]}}]`, []string{`hooks.rules[0].command.env[1]: "TOKEN=abc" is not an environment variable name`}},
		{"scrubber pattern", `scrubber: {extra_patterns: ["[z-a]"]}`, []string{`hook "scrubber": hooks.scrubber.extra_patterns[0]: invalid regular expression`}},
		{"scrubber allow pattern", `scrubber: {allow_patterns: [""]}`, []string{`hook "scrubber": hooks.scrubber.allow_patterns[0]: empty pattern`}},
		{"output limit", `output_limit: {max_bytes: 100, head: 80, tail: 40}`, []string{`hook "output_limit": hooks.output_limit.head: head (80) + tail (40) exceed max_bytes (100)`}},
		{"output limit negative", `output_limit: {max_bytes: -1}`, []string{`hooks.output_limit.max_bytes: must not be negative`}},
		{"several errors at once", `rules: [{name: a, phase: before, fail: x, match: "nope", block_when: "true"}]`, []string{"rules[0].fail", "rules[0].match"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewChain(parseConfig(t, tc.cfg), Options{})
			if err == nil {
				t.Fatal("NewChain accepted a bad configuration")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("error %T is not a *ConfigError", err)
			}
		})
	}
}

func TestConfigValid(t *testing.T) {
	cfg := parseConfig(t, `
scrubber:
  enabled: true
  high_entropy: false
  extra_patterns: ['corp-[a-z0-9]{8}']
  allow_patterns: ['AKIAIOSFODNN7EXAMPLE']
output_limit: {max_bytes: 1000, head: 600}
rules:
  - name: no-rm
    phase: before
    match: tool == "run_command"
    fail: fail_closed
    command: {argv: [../examples/hooks/block-rm.sh], timeout: 5s, env: [PATH]}
    message: rm is not allowed
  - name: cap
    set_args: '{"timeout_seconds": 60}'
  - name: emails
    redact: ['[a-z]+@example\.com']
  - name: short
    fail: fail_open
    truncate: {head: 10, tail: 10}
  - name: quiet
    phase: after
    block_when: is_error && result contains "internal"
    message: internal error
`)
	ch, err := NewChain(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	comp := ch.cur.Load()
	if comp.scrub == nil || comp.scrub.entropy || !comp.limit || comp.head != 600 || comp.tail != 400 || len(comp.rules) != 5 {
		t.Fatalf("compiled %+v", comp)
	}
	phases := ""
	for _, r := range comp.rules {
		phases += string(r.phase[0])
	}
	if phases != "bbaaa" || !comp.rules[3].failOpen || comp.rules[0].failOpen {
		t.Fatalf("phases %s, fail modes %v %v", phases, comp.rules[0].failOpen, comp.rules[3].failOpen)
	}
}
