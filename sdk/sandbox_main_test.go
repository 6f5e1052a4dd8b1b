package sdk_test

import (
	"os"
	"testing"

	"github.com/agentkernel/agentkernel/sandbox"
)

// TestMain lets the test binary act as the sandbox's launcher: plugins
// started through the kernel's host (sdktest.Exec) run confined.
func TestMain(m *testing.M) {
	sandbox.Main()
	os.Exit(m.Run())
}
