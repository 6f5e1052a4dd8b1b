package policy_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/policy"
)

// The previous release's names (turn.number, turn.round, turn.max_rounds,
// turn: in inputs) still load and decide exactly like the new ones, and
// every use is reported with its line, column and replacement.
func TestDeprecatedTurnNames(t *testing.T) {
	const file = "testdata/deprecated/turn-names.yaml"
	p, err := policy.LoadFile(context.Background(), file, policy.Options{Tools: policy.BuiltinSpecs()})
	if err != nil {
		t.Fatal(err) // Load runs the file's tests: the old names decide as before
	}
	var got []string
	for _, d := range p.Deprecated() {
		if d.Stage != policy.StageDeprecated || d.Source == "" {
			t.Errorf("problem %+v: want stage deprecated with its source line", d)
		}
		got = append(got, d.String())
	}
	want := []string{
		file + ":8:9: vars.late: turn.round is deprecated: write run.turn",
		file + ":8:23: vars.late: turn.max_rounds is deprecated: write run.max_turns",
		file + ":13:21: rule \"ask-late\": when: turn.number is deprecated: write run.number",
		file + ":14:32: rule \"ask-late\": message: turn.round is deprecated: write run.turn",
		file + ":17:16: budget \"turns\": stop_when: turn.round is deprecated: write run.turn",
		file + ":17:38: budget \"turns\": stop_when: turn.calls is deprecated: write run.calls",
		file + ":21:13: test \"late in the run asks\": input.turn is deprecated: write input.run (round is turn, max_rounds is max_turns)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("deprecations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// In a live kernel too, the old names read the state the new ones do.
	spec := policy.BuiltinSpecs()
	var write kernel.ToolSpec
	for _, sp := range spec {
		if sp.Name == "write_file" {
			write = sp
		}
	}
	for _, tc := range []struct {
		turn int
		want kernel.Effect
		msg  string
	}{{7, kernel.EffectAsk, "turn 7 of run 1"}, {2, kernel.EffectAllow, "no rule matched; the default is allow"}} {
		st := &kernel.State{Run: 1, Turn: tc.turn, MaxTurns: 8}
		call, err := kernel.NewCall("c1", write, []byte(`{"path":"a","content":"b"}`), st)
		if err != nil {
			t.Fatal(err)
		}
		d := p.Decide(context.Background(), st, call)
		if d.Effect != tc.want || d.Message != tc.msg {
			t.Errorf("turn %d: decision %s %q, want %s %q", tc.turn, d.Effect, d.Message, tc.want, tc.msg)
		}
	}
}

// A file without deprecated names reports none, and an input that writes
// both run and turn is an error.
func TestDeprecatedNone(t *testing.T) {
	p, err := policy.LoadFile(context.Background(), "../examples/policies/coding.yaml", policy.Options{Tools: policy.BuiltinSpecs()})
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Deprecated(); len(d) != 0 {
		t.Fatalf("coding.yaml uses deprecated names: %v", d)
	}
	_, err = policy.ParseInput("case.yaml", []byte("run: {turn: 2}\nturn: {round: 3}\n"))
	if err == nil || !errors.Is(err, policy.ErrSyntax) || !strings.Contains(err.Error(), "both run and its deprecated name turn") {
		t.Fatalf("run and turn together: %v", err)
	}
	_, err = policy.ParseInput("case.yaml", []byte("run: {calls: [{tool: a, outcome: fine}]}\n"))
	if err == nil || !strings.Contains(err.Error(), `input.run.calls[0].outcome must be one of ok, error`) {
		t.Fatalf("bad outcome: %v", err)
	}
}
