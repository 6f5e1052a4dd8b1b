package sandbox_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/sandbox"
)

// A Go program whose runtime reports that it could not allocate is named
// as stopped by memory_mb when the launcher's sampling missed the peak,
// and only then.
func TestExplainGoOutOfMemory(t *testing.T) {
	crashed := sandbox.Outcome{Known: true, Exited: true, ExitCode: 2}
	o := crashed.ExplainGoOutOfMemory(sandbox.Grant{MemoryMB: 64}, "fatal error: out of memory\n\ngoroutine 1 [running]:\n")
	if o.Limit == nil || o.Limit.Limit != "memory_mb" || !strings.Contains(o.String(), "sandbox limit memory_mb reached") || !strings.Contains(o.String(), "64 MiB") {
		t.Fatalf("outcome = %s", o)
	}
	if o := crashed.ExplainGoOutOfMemory(sandbox.Grant{}, "fatal error: runtime: cannot allocate memory\n"); o.Limit == nil || !strings.Contains(o.Limit.Detail, fmt.Sprintf("%d MiB", sandbox.DefaultMemoryMB)) {
		t.Fatalf("default limit: %s", o)
	}
	cpu := &sandbox.LimitError{Limit: "cpu", Detail: "spun"}
	for name, c := range map[string]struct {
		o     sandbox.Outcome
		crash string
	}{
		"another report":              {crashed, "panic: runtime error: index out of range\n"},
		"a report inside a line":      {crashed, "log: fatal error: out of memory\n"},
		"a clean exit":                {sandbox.Outcome{Known: true, Exited: true}, "fatal error: out of memory\n"},
		"a limit already named":       {sandbox.Outcome{Known: true, Signal: "killed", Limit: cpu}, "fatal error: out of memory\n"},
		"the launcher's own error":    {sandbox.Outcome{Known: true, Err: "not found"}, "fatal error: out of memory\n"},
		"no report from the launcher": {sandbox.Outcome{}, "fatal error: out of memory\n"},
	} {
		if got := c.o.ExplainGoOutOfMemory(sandbox.Grant{}, c.crash); got.Limit != c.o.Limit {
			t.Errorf("%s: limit %v", name, got.Limit)
		}
	}
}
