package langtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sandbox"
)

// BenchmarkPlugins compares the Go, TypeScript and Python conformance
// plugins side by side, through the real host and sandbox:
//
//   - start: verify the pin, exec (in the sandbox), handshake, health
//     check and Describe, as `kernel plugins verify` reports it (p50, p99),
//     and the CPU time (user+sys) of the processes each start ran, the
//     plugin's and its launcher's (cpu-ms/op: on a shared machine the
//     wall time measures the neighbours, this one the start), and the
//     host's own (host-cpu-ms/op: the pin check, the TLS handshake);
//   - start-warm (Go): a kernel (re)start of the eager plugin once an
//     earlier start verified its binary: a new host over the same state
//     directory runs the binary store's entry (checked, not copied and
//     hashed again), then as start (p50, p99, cpu-ms/op as start's, and
//     host-cpu-ms/op, the host's own CPU, where the store saves);
//   - noop: one call of a tool that does nothing (p50, p99);
//   - idle: the resident memory of the plugin's process after a call and
//     a second of rest (the sandbox's launcher, shared by every language,
//     apart).
//
// The sandbox starts make build's dedicated launcher
// (bin/agentkernel-sandbox-init), as the kernel does, not this test binary
// re-executed: a 30 MB race-built binary with cgo would charge every start
// a launcher the kernel never runs.
//
// make build && go test -run '^$' -bench Plugins ./sdk/langtest/
func BenchmarkPlugins(b *testing.B) {
	ctx := context.Background()
	launcher := filepath.Join(root, "bin", sandbox.LauncherName)
	if err := sandbox.UseLauncher(launcher, ""); err != nil {
		b.Fatalf("%v: run make build first", err)
	}
	defer func() { _ = sandbox.UseLauncher("", "") }()
	for _, lang := range languages {
		b.Run(lang+"/start", func(b *testing.B) {
			cfg := conformancePlugin(b, lang)
			h := newHost(b)
			var d []time.Duration
			cpu0, self0 := childrenCPU(b), selfCPU(b)
			for b.Loop() {
				rep, err := h.Verify(ctx, cfg)
				if err != nil {
					b.Fatal(err)
				}
				d = append(d, rep.StartTime)
			}
			// Verify stops the process and waits for it (and the launcher
			// for the plugin): their CPU is in RUSAGE_CHILDREN by now.
			cpu := childrenCPU(b) - cpu0
			reportPercentiles(b, d, time.Millisecond, "ms")
			b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(len(d)), "cpu-ms/op")
			b.ReportMetric(float64(selfCPU(b)-self0)/float64(time.Millisecond)/float64(len(d)), "host-cpu-ms/op")
		})
		if lang == "go" {
			b.Run(lang+"/start-warm", func(b *testing.B) { benchWarmStart(b, conformancePlugin(b, lang)) })
		}
		b.Run(lang+"/noop", func(b *testing.B) {
			noop := loadTool(b, conformancePlugin(b, lang), "noop")
			for range 20 { // warm up
				if _, err := noop.Call(ctx, []byte(`{}`)); err != nil {
					b.Fatal(err)
				}
			}
			var d []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := noop.Call(ctx, []byte(`{}`)); err != nil {
					b.Fatal(err)
				}
				d = append(d, time.Since(start))
			}
			reportPercentiles(b, d, time.Microsecond, "µs")
		})
		b.Run(lang+"/idle", func(b *testing.B) {
			cfg := conformancePlugin(b, lang)
			h := newHost(b)
			cfg.Start = subprocess.StartEager
			tools, err := h.Load(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			for _, tl := range tools {
				if strings.HasSuffix(tl.Spec().Name, ".noop") {
					if _, err := tl.Call(ctx, []byte(`{}`)); err != nil {
						b.Fatal(err)
					}
				}
			}
			time.Sleep(time.Second)
			launcher := h.Status()[0].PID
			var plugin int64
			for _, pid := range descendants(launcher) {
				plugin += rssKiB(pid)
			}
			for b.Loop() {
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(plugin)/1024, "plugin-RSS-MiB")
			b.ReportMetric(float64(rssKiB(launcher))/1024, "launcher-RSS-MiB")
		})
	}
}

func loadTool(b *testing.B, cfg subprocess.PluginConfig, name string) kernel.Tool {
	b.Helper()
	cfg.Start = subprocess.StartEager
	tools, err := newHost(b).Load(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, tl := range tools {
		if tl.Spec().Name == cfg.Name+"."+name {
			return tl
		}
	}
	b.Fatalf("no tool %s", name)
	return nil
}

// reportPercentiles reports the p50 and p99 of d in unit.
func reportPercentiles(b *testing.B, d []time.Duration, unit time.Duration, name string) {
	b.Helper()
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	at := func(p float64) float64 { return float64(d[min(len(d)-1, int(p*float64(len(d))))]) / float64(unit) }
	b.ReportMetric(at(0.50), "p50-"+name)
	b.ReportMetric(at(0.99), "p99-"+name)
	b.ReportMetric(0, "ns/op") // the percentiles are the measure
}

// childrenCPU is the user+sys CPU time of this process's waited-for
// children and their waited-for descendants.
// selfCPU is this process's user+sys CPU time (the host's side of a
// start: the pin check, the TLS handshake).
func selfCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func childrenCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// descendants lists the processes under pid, recursively.
func descendants(pid int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if c, err := strconv.Atoi(f); err == nil {
			out = append(out, c)
			out = append(out, descendants(c)...)
		}
	}
	return out
}

// rssKiB is the resident set size of pid, in KiB.
func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return n
		}
	}
	return 0
}

// benchWarmStart is start-warm: Load of the eager plugin cfg by a new
// host over a state directory whose binary store holds its entry.
func benchWarmStart(b *testing.B, cfg subprocess.PluginConfig) {
	ctx := context.Background()
	cfg.Start = subprocess.StartEager
	state := b.TempDir()
	warm := subprocess.NewHost(subprocess.HostConfig{StateDir: state})
	_, err := warm.Verify(ctx, cfg) // fills the store
	warm.Close()
	if err != nil {
		b.Fatal(err)
	}
	var d []time.Duration
	var children, self time.Duration
	for b.Loop() {
		h := subprocess.NewHost(subprocess.HostConfig{StateDir: state})
		c0, s0, start := childrenCPU(b), selfCPU(b), time.Now()
		if _, err := h.Load(ctx, cfg); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
		s1 := selfCPU(b)
		b.StopTimer()
		if err := h.Close(); err != nil {
			b.Fatal(err)
		}
		// Close waited for the launcher and the plugin.
		children += childrenCPU(b) - c0
		self += s1 - s0
		b.StartTimer()
	}
	reportPercentiles(b, d, time.Millisecond, "ms")
	b.ReportMetric(float64(children)/float64(time.Millisecond)/float64(len(d)), "cpu-ms/op")
	b.ReportMetric(float64(self)/float64(time.Millisecond)/float64(len(d)), "host-cpu-ms/op")
}
