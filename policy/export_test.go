package policy

import (
	"reflect"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// InputSections returns the keys of a test input's session and run
// sections (inputFields) with the Go type each one sets, and the turn
// section's renamed keys (old name → run's name), for the tests that
// generate schemas/policy.schema.json's input sections and check
// docs/policy.md.
func InputSections() (session, run map[string]reflect.Type, renamed map[string]string) {
	var st kernel.State
	var se, re time.Duration
	f := inputFields(&st, &se, &re)
	types := func(m map[string]reflect.Value) map[string]reflect.Type {
		out := make(map[string]reflect.Type, len(m))
		for k, v := range m {
			out[k] = v.Type()
		}
		return out
	}
	return types(f.session), types(f.run), deprecatedInputFields
}

// InputAgentSection returns the keys of a test input's agent section
// with the Go type each one sets.
func InputAgentSection() map[string]reflect.Type {
	var st kernel.State
	var se, re time.Duration
	out := map[string]reflect.Type{}
	for k, v := range inputFields(&st, &se, &re).agent {
		out[k] = v.Type()
	}
	return out
}

// FromSnapshot reports whether p was built from the test cache's snapshot
// (for the tests of package policy_test).
func FromSnapshot(p *Policy) bool { return p.snapshotSrc != nil }
