package mcp_test

import (
	"os"
	"testing"

	"github.com/agentkernel/agentkernel/sandbox"
)

// TestMain lets this test binary act as the sandbox's launcher: every
// stdio server the tests start runs confined, as in the kernel.
func TestMain(m *testing.M) {
	sandbox.Main()
	os.Exit(m.Run())
}
