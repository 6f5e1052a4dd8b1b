package subprocess_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sandbox"
)

// BenchmarkStart measures what starting a plugin costs.
//
//   - cold: what Load of an eager plugin does the first time: verify the
//     binary's sha256 while copying it to the private directory, exec,
//     go-plugin's AutoMTLS handshake, Describe.
//   - restart: exec, handshake and Describe of the already verified copy,
//     as on a lazy plugin's first call or a restart after a crash.
//   - verify: the sha256 check and the copy alone.
//   - verify-launcher: verify, then exec with the dedicated launcher
//     (below).
//   - warm-launcher: a kernel (re)start of an eager plugin whose binary
//     an earlier start verified: a new host over the same state
//     directory takes the binary store's entry (checked, not hashed),
//     then starts it as verify-launcher does.
//   - verify-store: the store's check alone (verify's counterpart).
func BenchmarkStart(b *testing.B) {
	cfg := misbehaveConfig()
	cfg.Start = subprocess.StartEager
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			h := subprocess.NewHost(subprocess.HostConfig{})
			if _, err := h.Load(context.Background(), cfg); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := h.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("restart", func(b *testing.B) {
		benchRestart(b, cfg)
	})
	// restart-launcher: restart with the dedicated launcher the kernel
	// uses (bin/agentkernel-sandbox-init, from make build) as the
	// sandbox's init instead of a re-exec of this test binary.
	b.Run("restart-launcher", func(b *testing.B) {
		defer useLauncher(b)()
		benchRestart(b, cfg)
	})
	// verify-launcher: what `kernel plugins verify` and a kernel's Load of
	// an eager plugin do, as the kernel does it (the dedicated launcher):
	// verify and copy, exec in the sandbox, handshake, health, Describe.
	// cpu-ms/op is the CPU time of the start, the host's own (this
	// process: the hash and copy, the TLS handshake) and its children's
	// (the launcher and the plugin): on a shared machine the wall time
	// measures the neighbours.
	b.Run("verify-launcher", func(b *testing.B) {
		defer useLauncher(b)()
		h := newHost(b, subprocess.HostConfig{})
		var d []time.Duration
		cpu0 := cpuTime(b)
		for b.Loop() {
			rep, err := h.Verify(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			d = append(d, rep.StartTime)
		}
		cpu := cpuTime(b) - cpu0
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2])/float64(time.Millisecond), "p50-ms")
		b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(len(d)), "cpu-ms/op")
	})
	b.Run("warm-launcher", func(b *testing.B) {
		defer useLauncher(b)()
		state := b.TempDir()
		if _, err := newHost(b, subprocess.HostConfig{StateDir: state}).Verify(context.Background(), cfg); err != nil {
			b.Fatal(err) // fills the store
		}
		var d []time.Duration
		var cpu time.Duration
		for b.Loop() {
			h := subprocess.NewHost(subprocess.HostConfig{StateDir: state})
			cpu0, start := cpuTime(b), time.Now()
			if _, err := h.Load(context.Background(), cfg); err != nil {
				b.Fatal(err)
			}
			d = append(d, time.Since(start))
			b.StopTimer()
			if err := h.Close(); err != nil {
				b.Fatal(err)
			}
			// Close waited for the launcher: its CPU and the plugin's
			// are in RUSAGE_CHILDREN now (and so is the stop's).
			cpu += cpuTime(b) - cpu0
			if subprocess.StoreHits(h) == 0 {
				b.Fatal("the start did not use the store")
			}
			b.StartTimer()
		}
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2])/float64(time.Millisecond), "p50-ms")
		b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(len(d)), "cpu-ms/op")
	})
	b.Run("verify-store", func(b *testing.B) {
		h := newHost(b, subprocess.HostConfig{StateDir: b.TempDir()})
		if _, done, err := subprocess.StoredCopy(h, cfg); err != nil {
			b.Fatal(err)
		} else {
			done()
		}
		timeCopies(b, time.Microsecond, "µs", func() (func(), error) {
			_, done, err := subprocess.StoredCopy(h, cfg)
			return done, err
		})
	})
	// verify: the pin check and the private copy alone (the copy and the
	// hash overlap: wall time below their sum where a second CPU is free;
	// cpu-ms/op is both).
	b.Run("verify", func(b *testing.B) {
		h := newHost(b, subprocess.HostConfig{})
		b.SetBytes(fileSize(b, misbehave.path))
		timeCopies(b, time.Millisecond, "ms", func() (func(), error) {
			_, done, err := subprocess.VerifyCopy(h, cfg)
			return done, err
		})
	})
}

// timeCopies times call (a verification or a store lookup, which returns
// its clean-up) once per iteration and reports its p50 and its CPU per
// call in unit (named name: "ms", "µs").
func timeCopies(b *testing.B, unit time.Duration, name string, call func() (func(), error)) {
	var d []time.Duration
	cpu0 := cpuTime(b)
	for b.Loop() {
		start := time.Now()
		done, err := call()
		d = append(d, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		done()
	}
	cpu := cpuTime(b) - cpu0
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2])/float64(unit), "p50-"+name)
	b.ReportMetric(float64(cpu)/float64(unit)/float64(len(d)), "cpu-"+name+"/op")
}

// benchRestart starts the verified copy of cfg's binary b.N times.
func benchRestart(b *testing.B, cfg subprocess.PluginConfig) {
	h := newHost(b, subprocess.HostConfig{})
	exe, done, err := subprocess.VerifyCopy(h, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer done()
	for b.Loop() {
		kill, err := subprocess.StartProcess(h, cfg, exe)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		kill()
		b.StartTimer()
	}
}

// useLauncher makes the sandbox start the dedicated launcher (make build's
// bin/agentkernel-sandbox-init), as the kernel does, and returns the
// function that goes back to re-executing this test binary.
func useLauncher(b *testing.B) func() {
	p, err := filepath.Abs(filepath.Join("..", "..", "bin", sandbox.LauncherName))
	if err != nil {
		b.Fatal(err)
	}
	if err := sandbox.UseLauncher(p, ""); err != nil {
		b.Skipf("%v: run make build first", err)
	}
	return func() { _ = sandbox.UseLauncher("", "") }
}

// cpuTime is the user+sys CPU time of this process and of its waited-for
// children and their waited-for descendants.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var self, children syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children); err != nil {
		b.Fatal(err)
	}
	ns := self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano()
	return time.Duration(ns)
}

func fileSize(b *testing.B, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// benchCalls calls tool b.N times in a row and reports the latency
// percentiles.
func benchCalls(b *testing.B, tool string, args json.RawMessage) {
	h := newHost(b, subprocess.HostConfig{})
	cfg := misbehaveConfig()
	cfg.Start = subprocess.StartEager
	tools := load(b, h, cfg)
	t := tools[tool]
	ctx := context.Background()
	for range 100 { // warm up the connection
		if _, err := t.Call(ctx, args); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := t.Call(ctx, args); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkCallNoop measures one call of a tool that does nothing.
func BenchmarkCallNoop(b *testing.B) { benchCalls(b, "mb.noop", json.RawMessage(`{}`)) }

// BenchmarkCall64KiB measures one call with a 64 KiB argument.
func BenchmarkCall64KiB(b *testing.B) {
	args, _ := json.Marshal(map[string]string{"text": strings.Repeat("a", 64<<10)})
	b.SetBytes(int64(len(args)))
	benchCalls(b, "mb.size", args)
}
