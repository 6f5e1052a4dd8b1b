package sdk_test

import (
	"context"
	"os"
	"testing"

	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/sdk"
)

// TestMain lets the test binary act as the sandbox's launcher: plugins
// started through the kernel's host (sdktest.Exec) run confined.
//
// With SDK_TEST_SERVE set it is a plugin instead (sdk.Serve, one no-op
// tool): TestServerMutualTLS starts it as the host would.
func TestMain(m *testing.M) {
	sandbox.Main()
	if os.Getenv("SDK_TEST_SERVE") == "1" {
		sdk.Serve(sdk.Text(sdk.Spec{Name: "noop", Description: "Does nothing.", Schema: `{"type":"object"}`, Tier: sdk.ReadOnly},
			func(context.Context, struct{}) (string, error) { return "", nil }))
	}
	os.Exit(m.Run())
}
