package policy

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

func TestRunFieldsOf(t *testing.T) {
	for _, c := range []struct {
		src  string
		want runFields
	}{
		{`run.turn > budget.max_turns`, rfTurn},
		{`run.turn > 3 && run.tokens > 100`, rfTurn | rfTokens},
		{`len(run.calls) > 2 || "x" in run.tools`, rfCalls},
		{`run.phase == "after_tools"`, 0},
		{`session.tokens > 10`, 0},
		{`run.max_turns - run.turn < 2 && run.elapsed > duration("1m")`, rfMaxTurns | rfTurn | rfElapsed},
		{`call.args.note == "run.prompt"`, rfPrompt}, // a string: more, never less
		// run not followed at once by .<field>: every field.
		{`toJSON(run) != ""`, rfAll},
		{`let r = run; r.calls != nil`, rfAll},
		{`run?.turn > 1`, rfAll},
		{`run["calls"] != nil`, rfAll},
		{`run . calls != nil`, rfAll},
		{`map([run], #.turn)[0] > 1`, rfAll},
		{`run.nosuch > 1`, rfAll},
		// turn reads the run through a pointer; $env reads anything.
		{`turn.round > 3`, rfAll},
		{`run.turn > 1 && call.args.turn == 2`, rfAll},
		{`$env.run.turn > 1`, rfAll},
		{`$env["r" + "un"]["calls"] != nil`, rfAll},
	} {
		if got := runFieldsOf(c.src); got != c.want {
			t.Errorf("runFieldsOf(%s) = %b, want %b", c.src, got, c.want)
		}
	}
}

// TestRunFieldBitsNameEveryField: every field of RunEnv has its bit (or is
// phase, which budget sets), so Budget's field-by-field fill can fill any
// field a budget names.
func TestRunFieldBitsNameEveryField(t *testing.T) {
	rt := reflect.TypeFor[RunEnv]()
	var all runFields
	for i := range rt.NumField() {
		tag := rt.Field(i).Tag.Get("expr")
		bit, ok := runFieldBits[tag]
		if !ok {
			t.Errorf("RunEnv field %s (run.%s) has no bit in runFieldBits", rt.Field(i).Name, tag)
		}
		if bit == 0 && tag != "phase" {
			t.Errorf("run.%s has bit 0", tag)
		}
		all |= bit
	}
	if len(runFieldBits) != rt.NumField() {
		t.Errorf("runFieldBits has %d names, RunEnv %d fields", len(runFieldBits), rt.NumField())
	}
	if all != rfAll {
		t.Errorf("the bits of RunEnv's fields are %b, rfAll is %b", all, rfAll)
	}
}

// runFieldState is a State whose every run field is non-zero.
func runFieldState() *kernel.State {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	st := &kernel.State{Run: 3, Turn: 2, MaxTurns: 50, Prompt: "list the files", Corrections: 1,
		RunStarted: now.Add(-90 * time.Second), Now: now, ToolCounts: map[string]int{"read_file": 1},
		RunCalls: []kernel.CallOutcome{{Tool: "read_file", Outcome: kernel.OutcomeOK}, {Tool: "shell", Outcome: kernel.OutcomeDenied}}}
	st.RunTotals.Usage.InputTokens, st.RunTotals.Usage.OutputTokens, st.RunTotals.CostUSD = 120, 30, 0.25
	return st
}

// TestBudgetReadsEveryRunField: a budget that names one run field
// (field-by-field fill) sees it as a budget that reads the whole run
// section (the full fill) does, with a full State and then a zero one, for
// every field; and the pooled Env is zero again after it.
func TestBudgetReadsEveryRunField(t *testing.T) {
	ctx := context.Background()
	rt := reflect.TypeFor[RunEnv]()
	for i := range rt.NumField() {
		tag := rt.Field(i).Tag.Get("expr")
		budget := func(msg string) *Policy {
			return compileT(t, "name: b\nrevision: \"1\"\ndefaults: {tool_call: allow}\nbudgets:\n  - id: b\n    stop_when: 'true'\n    message: '"+msg+"'\n")
		}
		one := budget(`toJSON(run.` + tag + `)`)
		whole := budget(`toJSON(run.` + tag + `) + (toJSON(run) == "" ? "!" : "")`)
		if one.budgetReads(); one.budgetRun == rfAll && tag != "phase" {
			t.Fatalf("run.%s: the budget is filled whole (the test tests nothing)", tag)
		}
		if whole.budgetReads(); whole.budgetRun != rfAll {
			t.Fatalf("run.%s: toJSON(run) did not make the fill whole", tag)
		}
		for range 3 { // pooled environments are reused
			// The full State last, and the field-by-field budget after the
			// whole one: the pooled Env is checked after it.
			for _, st := range []*kernel.State{{}, runFieldState()} {
				for _, phase := range []kernel.BudgetPhase{kernel.BeforeModel, kernel.AfterTools} {
					want := whole.Budget(ctx, st, phase).Stop.Message
					got := one.Budget(ctx, st, phase).Stop.Message
					if got != want {
						t.Fatalf("run.%s: a budget naming it saw %s, the whole run section has %s", tag, got, want)
					}
					if st.Run != 0 && (got == "0" || got == `""` || got == "null" || got == "[]") {
						t.Fatalf("run.%s reads %s from a State where it is set (the test tests nothing)", tag, got)
					}
				}
			}
			env := getEnv()
			if calls, tools := env.Run.Calls, env.Run.Tools; len(calls) != 0 || len(tools) != 0 {
				t.Fatalf("run.%s: a pooled Env keeps %d calls, %d tools", tag, len(calls), len(tools))
			}
			if r := env.Run; !reflect.DeepEqual(RunEnv{Calls: r.Calls, Tools: r.Tools}, r) || env.Turn != (TurnEnv{}) {
				t.Fatalf("run.%s: a pooled Env is not zero: %+v %+v", tag, r, env.Turn)
			}
			putEnv(env)
		}
	}
}
