package policy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/policy"
)

func TestParseInput(t *testing.T) {
	for _, tc := range []struct {
		name, src, wantErr string
	}{
		{"ok", "call: {tool: read_file, args: {path: a}}\nsession: {elapsed: 90s, cost_usd: 1}\nnow: 2026-03-01T10:00:00Z\n", ""},
		{"unknown field", "call: {tool: read_file, arg: {path: a}}\n", "case.yaml:1:25: call: unknown field \"arg\"; did you mean `args`? (valid fields: args, id, tool)"},
		{"bad duration", "session: {elapsed: soon}\n", `case.yaml:1:20: session.elapsed: expected a duration such as "90s" or "10m", got the scalar "soon"`},
		{"bad phase", "phase: lunch\n", `input.phase must be before_model or after_tools, got "lunch"`},
		{"bad tier", "tool: {tier: admin}\n", `input.tool.tier must be read_only, side_effecting or privileged`},
		{"unknown tool field", "tool: {tire: privileged}\n", "case.yaml:1:8: tool: unknown field \"tire\"; did you mean `tier`? (valid fields: source, tags, tier)"},
		{"bad time", "now: yesterday\n", `case.yaml:1:6: now: expected an RFC 3339 time`},
		// The session and run sections decode straight into kernel.State:
		// their errors keep the line and column.
		{"bad session field", "session: {tokens_in: many}\n", `case.yaml:1:22: session.tokens_in: expected an integer, got the scalar "many"`},
		{"unknown run field", "run:\n  nope: 1\n", `case.yaml:2:3: run: unknown field "nope" (valid fields: calls, corrections, cost_usd, elapsed, max_turns, number, prompt, tokens_in, tokens_out, turn)`},
		{"new key in the deprecated turn section", "turn: {round: 2, turn: 3}\n", `case.yaml:1:18: turn: unknown field "turn"`},
		{"both run and turn", "run: {turn: 2}\nturn: {round: 2}\n", `case.yaml:2:7: input has both run and its deprecated name turn`},
		{"bad outcome", "run:\n  calls: [{tool: a, outcome: weird}]\n", `case.yaml:2:3: input.run.calls[0].outcome must be one of`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := policy.ParseInput("case.yaml", []byte(tc.src))
			if tc.wantErr == "" {
				if err != nil || in.SessionElapsed != 90*time.Second || in.State.SessionTotals.CostUSD != 1 || in.Now.Hour() != 10 || in.Call.Args["path"] != "a" {
					t.Fatalf("input = %+v, %v", in, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, policy.ErrSyntax) {
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// The tool section decodes straight into a kernel.ToolSpec, whose set
// fields override the spec of the tool the call names.
func TestInputToolSection(t *testing.T) {
	in, err := policy.ParseInput("case.yaml", []byte("call: {tool: read_file}\ntool: {tier: privileged, source: mcp:fs, tags: [net]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if in.Spec.Tier != kernel.TierPrivileged || in.Spec.Source != "mcp:fs" || len(in.Spec.Tags) != 1 || in.Spec.Tags[0] != "net" {
		t.Fatalf("spec = %+v", in.Spec)
	}
	p, err := policy.Compile(context.Background(), "p.yaml", []byte("name: p\nrevision: \"1\"\ndefaults: {tool_call: allow}\nrules:\n  - id: priv\n    effect: deny\n    when: tool.tier == \"privileged\" && tool.source == \"mcp:fs\" && \"net\" in tool.tags\n"), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := p.Explain(in)
	if err != nil || x.Call == nil || x.Call.Decision.Effect != kernel.EffectDeny {
		t.Fatalf("Explain = %+v, %v; want the override to reach the rule", x, err)
	}
}

func TestCheckFile(t *testing.T) {
	if _, err := policy.CheckFile(context.Background(), "../examples/policies/coding.yaml", policy.Options{Tools: policy.BuiltinSpecs()}); err != nil {
		t.Fatal(err)
	}
	// check reports what lint finds, including untested rules...
	_, err := policy.CheckFile(context.Background(), "testdata/errors/untested.yaml", policy.Options{})
	var le *policy.LoadError
	if !errors.As(err, &le) || len(le.Problems) != 4 || !errors.Is(err, policy.ErrLint) {
		t.Fatalf("CheckFile(untested) = %v", err)
	}
	// ...but test failures are for `policy test`.
	if _, err := policy.CheckFile(context.Background(), "testdata/errors/failing-test.yaml", policy.Options{}); err != nil {
		t.Fatalf("CheckFile(failing tests) = %v", err)
	}
	if _, err := policy.CheckFile(context.Background(), "testdata/errors/misspelt-field.yaml", policy.Options{}); !errors.Is(err, policy.ErrCompile) || errors.Is(err, policy.ErrLint) {
		t.Fatalf("CheckFile(misspelt) = %v", err)
	}
	if _, err := policy.CheckFile(context.Background(), "testdata/nope.yaml", policy.Options{}); err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("CheckFile(missing) = %v", err)
	}
}

func TestLoadErrorSentinels(t *testing.T) {
	for _, tc := range []struct {
		file string
		want error
	}{
		{"yaml-syntax", policy.ErrSyntax},
		{"unknown-fields", policy.ErrSyntax},
		{"names", policy.ErrCompile},
		{"duplicate-ids", policy.ErrLint},
		{"failing-test", policy.ErrTestsFailed},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, err := policy.LoadFile(context.Background(), "testdata/errors/"+tc.file+".yaml", policy.Options{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("error = %v, want %v", err, tc.want)
			}
			for _, other := range []error{policy.ErrSyntax, policy.ErrCompile, policy.ErrLint, policy.ErrTestsFailed} {
				if other != tc.want && errors.Is(err, other) {
					t.Fatalf("error also matches %v", other)
				}
			}
		})
	}
	big := make([]byte, policy.MaxFileSize+1)
	if _, err := policy.Load(context.Background(), "big.yaml", big, policy.Options{}); !errors.Is(err, policy.ErrSyntax) {
		t.Fatalf("oversized file: %v", err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestDecisionLogWriteError(t *testing.T) {
	log := policy.NewDecisionLog(failingWriter{}, nil)
	p, err := policy.LoadFile(context.Background(), "../examples/policies/coding.yaml", policy.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	st := &kernel.State{Run: 1, Turn: 1}
	c, err := kernel.NewCall("c", policy.BuiltinSpecs()[0], []byte(`{"path":"a"}`), st)
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Decide(context.Background(), st, c); d.Effect != kernel.EffectAllow {
		t.Fatalf("a failing log changed the decision: %+v", d)
	}
	if err := log.Err(); err == nil || err.Error() != "disk full" {
		t.Fatalf("log.Err() = %v", err)
	}
}

// TestWatcherIgnoresUnchangedContent: events that do not change the bytes
// (touch, a rewrite with the same content, an unrelated file) do not
// reload.
func TestWatcherIgnoresUnchangedContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(path, []byte(makePolicy("1", false)), 0o600); err != nil {
		t.Fatal(err)
	}
	rl := newReloads()
	w, err := policy.NewWatcher(context.Background(), policy.WatcherConfig{Path: path, OnReload: rl.on, Debounce: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.WriteFile(path, []byte(makePolicy("1", false)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := os.Chtimes(path, now, now); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let those events pass the debounce
	if err := os.WriteFile(path, []byte(makePolicy("2", true)), 0o600); err != nil {
		t.Fatal(err)
	}
	if e := rl.next(t); e.Revision != "2" || e.Err != nil {
		t.Fatalf("first reload = %+v, want revision 2", e)
	}
}

// TestUnregisteredToolsOnce: against a stand-in for a deployment's tools
// (the CLI's embedded defaults), the tools a file uses that are missing
// are one problem naming each tool once with the rules that use it, not
// a problem per rule; against a deployment's own tools, each use is
// reported where it is.
func TestUnregisteredToolsOnce(t *testing.T) {
	defaults := policy.BuiltinSpecs()[:3] // read_file, list_dir, search
	ctx := context.Background()
	_, err := policy.LoadFile(ctx, "../examples/policies/coding.yaml", policy.Options{Tools: defaults, ToolsFrom: "the embedded defaults"})
	var le *policy.LoadError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v", err)
	}
	if len(le.Problems) != 1 || strings.Count(err.Error(), "run_command") != 1 ||
		!strings.Contains(err.Error(), `3 tools are not registered by the embedded defaults (which register list_dir, read_file, search): run_command (rule "no-rm-rf", rule "no-force-push", rule "no-hard-reset"); write_file (rule "writes-outside-src"); edit_file (rule "writes-outside-src")`) ||
		!strings.Contains(err.Error(), "--config FILE") {
		t.Fatalf("err = %v", err)
	}
	if !slices.Equal(le.Unregistered, []string{"run_command", "write_file", "edit_file"}) {
		t.Fatalf("Unregistered = %v", le.Unregistered)
	}
	_, err = policy.LoadFile(ctx, "../examples/policies/coding.yaml", policy.Options{Tools: defaults})
	if !errors.As(err, &le) || len(le.Problems) != 5 || len(le.Unregistered) != 3 {
		t.Fatalf("without ToolsFrom: %v", err)
	}
}
