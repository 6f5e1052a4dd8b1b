//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"os/exec"
	"runtime"
)

// Main does nothing off Linux: there is no launcher.
func Main() {}

// ErrNoMain is returned by Command when Main was not called.
var ErrNoMain = errors.New("sandbox: sandbox.Main() was not called first in main")

// Cmd is a program that would run confined; off Linux it runs only when
// the grant accepts every missing layer.
type Cmd struct {
	*exec.Cmd
	// Thread is Linux's (the thread a launcher is forked on); off Linux
	// there is no launcher and it is ignored.
	Thread func(fork func() error) error
}

// Command refuses unless g.AllowMissing names every layer g needs: no
// layer exists off Linux.
func Command(ctx context.Context, g Grant, argv []string) (*Cmd, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("sandbox: empty argv")
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if err := Check().Missing(g); err != nil {
		return nil, err
	}
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = []string{}
	return &Cmd{Cmd: c}, nil
}

// CommandPrestarted is Command: off Linux there is no launcher to start
// ahead.
func CommandPrestarted(ctx context.Context, g Grant, argv []string) (*Cmd, error) {
	return Command(ctx, g, argv)
}

// Outcome is unknown off Linux.
func (c *Cmd) Outcome() Outcome { return Outcome{} }

// Check reports every layer missing.
func Check() Report {
	var r Report
	for _, l := range Layers() {
		r.Layers = append(r.Layers, LayerStatus{Layer: l, Detail: "not available on " + runtime.GOOS})
	}
	return r
}

// LauncherName is the dedicated launcher's file name (Linux's; off Linux
// there is no launcher and UseLauncher refuses).
const LauncherName = "agentkernel-sandbox-init"

// UseLauncher refuses off Linux: there is no launcher to use.
func UseLauncher(path, wantSHA256 string) error {
	if path == "" {
		return nil
	}
	return errors.New("sandbox: no launcher on " + runtime.GOOS)
}

// DefaultPrestart is Linux's default; off Linux nothing is pre-started.
const DefaultPrestart = 1

// SetPrestart does nothing off Linux: there is no launcher to keep ready.
func SetPrestart(n int) {}

// ClosePrestarted does nothing off Linux.
func ClosePrestarted() {}

// WarmUp starts nothing off Linux. It fails, as Command would, unless the
// grant accepts every missing layer.
func WarmUp(ctx context.Context, g Grant) error {
	if err := g.Validate(); err != nil {
		return err
	}
	return Check().Missing(g)
}

// PrestartStats counts what pre-starting did: nothing off Linux.
type PrestartStats struct {
	Ready, Hits, Misses, Stale int
}

// Prestarted reports zero counters off Linux.
func Prestarted() PrestartStats { return PrestartStats{} }
