package sandbox_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/sandbox"
)

// p50 reports the median of the loop's iterations as p50-ms.
func p50(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	if len(d) > 0 {
		b.ReportMetric(float64(d[len(d)/2])/1e6, "p50-ms")
	}
}

// BenchmarkTrueUnconfined is the baseline: fork and exec /bin/true.
func BenchmarkTrueUnconfined(b *testing.B) {
	var d []time.Duration
	for b.Loop() {
		start := time.Now()
		cmd := exec.Command("/bin/true")
		cmd.Env = []string{}
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	p50(b, d)
}

// BenchmarkTrueConfined runs /bin/true through the sandbox with
// run_command's default shape of grant (new network namespace included):
// the difference to BenchmarkTrueUnconfined is the added latency of
// confinement.
func BenchmarkTrueConfined(b *testing.B) { benchConfined(b, nil) }

// BenchmarkTrueConfinedNet is the same with a net grant (no new network
// namespace): the difference is the network namespace's cost.
func BenchmarkTrueConfinedNet(b *testing.B) { benchConfined(b, &sandbox.Net{}) }

// BenchmarkTruePrestarted is BenchmarkTrueConfined through a launcher
// pre-started for the grant (Cmd.Prestarted), as run_command and command
// hooks start: the ready launcher is waited for outside the timer, as a
// model's turn gives it time to get ready between tool calls.
func BenchmarkTruePrestarted(b *testing.B) { benchPrestarted(b, true) }

// BenchmarkTruePrestartedBackToBack does not wait: each start takes
// whatever launcher is there, ready or still confining itself.
func BenchmarkTruePrestartedBackToBack(b *testing.B) { benchPrestarted(b, false) }

// BenchmarkTruePrestartedLauncher is BenchmarkTruePrestarted with the
// dedicated launcher, as the kernel runs it.
func BenchmarkTruePrestartedLauncher(b *testing.B) {
	useDedicatedLauncher(b)
	benchPrestarted(b, true)
}

func benchPrestarted(b *testing.B, wait bool) {
	ws := b.TempDir()
	g := workspaceGrant(ws)
	sandbox.Check()
	defer sandbox.ClosePrestarted()
	before := sandbox.Prestarted()
	var d []time.Duration
	for b.Loop() {
		if wait {
			b.StopTimer()
			if err := sandbox.WarmUp(context.Background(), g); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		d = append(d, timeTrue(b, sandbox.CommandPrestarted, g, ws))
	}
	p50(b, d)
	st := sandbox.Prestarted()
	hits, misses := st.Hits-before.Hits, st.Misses-before.Misses
	b.ReportMetric(float64(hits)/float64(hits+misses), "hit-ratio")
}

func benchConfined(b *testing.B, net *sandbox.Net) {
	ws := b.TempDir()
	g := workspaceGrant(ws)
	g.Net = net
	sandbox.Check() // the one-time probe is not part of a call
	var d []time.Duration
	for b.Loop() {
		d = append(d, timeTrue(b, sandbox.Command, g, ws))
	}
	p50(b, d)
}

// timeTrue runs /bin/true confined, started by command, and times it.
func timeTrue(b *testing.B, command func(context.Context, sandbox.Grant, []string) (*sandbox.Cmd, error), g sandbox.Grant, ws string) time.Duration {
	start := time.Now()
	cmd, err := command(context.Background(), g, []string{"/bin/true"})
	if err != nil {
		b.Fatal(err)
	}
	cmd.Dir = ws
	if err := cmd.Run(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkTrueConfinedLauncher is BenchmarkTrueConfined with the
// dedicated launcher the kernel uses (bin/agentkernel-sandbox-init)
// instead of a re-exec of the running binary.
func BenchmarkTrueConfinedLauncher(b *testing.B) {
	useDedicatedLauncher(b)
	benchConfined(b, nil)
}

// BenchmarkTrueConfinedKernelReexec is the launcher as it was before the
// dedicated one: a re-exec of the whole kernel binary (bin/kernel, whose
// main calls sandbox.Main first), package initialisers and all. Compare
// with BenchmarkTrueConfinedLauncher.
func BenchmarkTrueConfinedKernelReexec(b *testing.B) {
	p, err := filepath.Abs(filepath.Join("..", "bin", "kernel"))
	if err != nil {
		b.Fatal(err)
	}
	if err := sandbox.UseLauncher(p, ""); err != nil {
		b.Skipf("%v: run `make build` first", err)
	}
	b.Cleanup(func() { _ = sandbox.UseLauncher("", "") })
	benchConfined(b, nil)
}
