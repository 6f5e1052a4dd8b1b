package kerneltest

import (
	"encoding/json"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
)

// NewCall builds a call of t outside the loop, for tests of hooks and
// policies: t is registered in a registry of its own, args are validated
// against its schema (and SetArgs validates again), st is the state policy
// and hooks see. A registration or validation failure fails the test.
func NewCall(tb testing.TB, id string, t kernel.Tool, args string, st *kernel.State) *kernel.Call {
	tb.Helper()
	reg := kernel.NewRegistry()
	if err := reg.Register(t); err != nil {
		tb.Fatalf("kerneltest.NewCall: %v", err)
	}
	c, err := reg.NewCall(id, t.Spec().Name, json.RawMessage(args), st)
	if err != nil {
		tb.Fatalf("kerneltest.NewCall: %v", err)
	}
	return c
}
