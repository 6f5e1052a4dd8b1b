package builtin_test

import (
	"os"
	"testing"

	"github.com/agentkernel/agentkernel/sandbox"
)

// TestMain lets the test binary act as the sandbox's launcher: run_command
// re-executes it.
func TestMain(m *testing.M) {
	sandbox.Main()
	os.Exit(m.Run())
}
