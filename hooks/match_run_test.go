package hooks

import (
	"encoding/json"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
)

// A matcher reads the run and the turn of the call from the kernel's
// State under the glossary's names: run is the prompt, turn the generation.
func TestMatcherRunAndTurn(t *testing.T) {
	tool := newTextTool("echo", kernel.TierReadOnly, nil)
	st := &kernel.State{SessionID: "s1", Run: 2, Turn: 3}
	c, err := kernel.NewCall("c1", tool.Spec(), json.RawMessage(`{"text":"x"}`), st)
	if err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]bool{
		`run == 2 && turn == 3`: true,
		`run == 3`:              false,
		`turn == 2`:             false,
	} {
		m, err := NewMatcher(src)
		if err != nil {
			t.Fatal(err)
		}
		env := envFor(c, PhaseBefore, nil, nil)
		got, err := m.Match(env)
		releaseEnv(env)
		if err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", src, got, err, want)
		}
	}
}
