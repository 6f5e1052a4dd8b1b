package sandbox_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/agentkernel/agentkernel/sandbox"
)

// BenchmarkTrueUnconfined is the baseline: fork and exec /bin/true.
func BenchmarkTrueUnconfined(b *testing.B) {
	for b.Loop() {
		cmd := exec.Command("/bin/true")
		cmd.Env = []string{}
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTrueConfined runs /bin/true through the sandbox with
// run_command's default shape of grant: the difference to
// BenchmarkTrueUnconfined is the added latency of confinement.
func BenchmarkTrueConfined(b *testing.B) {
	ws := b.TempDir()
	g := workspaceGrant(ws)
	sandbox.Check() // the one-time probe is not part of a call
	for b.Loop() {
		cmd, err := sandbox.Command(context.Background(), g, []string{"/bin/true"})
		if err != nil {
			b.Fatal(err)
		}
		cmd.Dir = ws
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}
