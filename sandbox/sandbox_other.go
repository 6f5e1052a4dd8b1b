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
