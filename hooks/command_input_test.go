package hooks

import (
	"encoding/json"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
)

// TestCommandHookInputPlacesTheCall: a command hook reads the run of the
// session and the turn of that run that asked for the call (the kernel's
// glossary), and the document matches schemas/hook-input.schema.json.
func TestCommandHookInputPlacesTheCall(t *testing.T) {
	ch := &commandHook{name: "h", phase: PhaseBefore}
	st := &kernel.State{SessionID: "s1", Run: 3, Turn: 2}
	c, err := kernel.NewCall("c1", kernel.ToolSpec{Name: "t", Tier: kernel.TierReadOnly}, []byte(`{}`), st)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ch.input(c, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var in Input
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	if in.SessionID != "s1" || in.Run != 3 || in.Turn != 2 || in.CallID != "c1" {
		t.Errorf("input %+v: want session s1, run 3, turn 2, call c1", in)
	}
	s, err := inputSchema()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ValidateJSON(b); err != nil {
		t.Errorf("%s does not match schemas/hook-input.schema.json: %v", b, err)
	}
}
