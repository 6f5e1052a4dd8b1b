package wasm

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// effective is what a module may do: the manifest's request intersected
// with the operator's grant.
type effective struct {
	mounts    []mount
	env       []envVar // sorted by name
	clock     bool
	random    bool
	memoryMB  int
	timeout   time.Duration
	maxOutput int
}

type mount struct {
	guest    string
	host     string
	readOnly bool
	root     *os.Root // opened by Load, closed with the module
}

type envVar struct{ name, value string }

// intersect computes the effective capabilities and a warning for every
// request the operator did not grant (and every grant nothing requested).
// It does not touch the file system.
func intersect(req *requested, g *Grants) (effective, []string) {
	var e effective
	var warn []string
	warnf := func(format string, args ...any) { warn = append(warn, fmt.Sprintf(format, args...)) }

	granted := map[string]FSGrant{}
	for _, fg := range g.FS {
		granted[fg.Guest] = fg
	}
	for _, r := range req.FS {
		fg, ok := granted[r.Guest]
		if !ok {
			warnf("fs %s (%s) requested but not granted: the guest will not see it", r.Guest, r.Mode)
			continue
		}
		delete(granted, r.Guest)
		ro := r.Mode != "rw" || fg.Mode != "rw"
		if r.Mode == "rw" && ro {
			warnf("fs %s requested rw but granted ro: writes will fail", r.Guest)
		}
		e.mounts = append(e.mounts, mount{guest: r.Guest, host: fg.Host, readOnly: ro})
	}
	for _, fg := range g.FS {
		if _, left := granted[fg.Guest]; left {
			warnf("grant fs %s is not requested by the manifest: ignored", fg.Guest)
		}
	}

	envLeft := map[string]bool{}
	for k := range g.Env {
		envLeft[k] = true
	}
	for _, name := range req.Env {
		v, ok := g.Env[name]
		if !ok {
			warnf("env %s requested but not granted: the guest will not see it", name)
			continue
		}
		delete(envLeft, name)
		e.env = append(e.env, envVar{name: name, value: v})
	}
	for _, k := range sortedKeys(envLeft) {
		warnf("grant env %s is not requested by the manifest: ignored", k)
	}
	slices.SortFunc(e.env, func(a, b envVar) int { return strings.Compare(a.name, b.name) })

	e.clock = req.Clock && g.Clock
	if req.Clock && !g.Clock {
		warnf("clock requested but not granted: the guest sees a fake clock and sleeping returns at once")
	}
	if g.Clock && !req.Clock {
		warnf("grant clock is not requested by the manifest: ignored")
	}
	e.random = req.Random && g.Random
	if req.Random && !g.Random {
		warnf("random requested but not granted: the guest gets a deterministic stream")
	}
	if g.Random && !req.Random {
		warnf("grant random is not requested by the manifest: ignored")
	}

	e.memoryMB = limit("memory_mb", req.MemoryMB, g.MemoryMB, DefaultMemoryMB, warnf)
	e.timeout = time.Duration(limit("timeout", int64(req.timeout), int64(g.Timeout), int64(DefaultTimeout), warnf))
	e.maxOutput = limit("max_output_bytes", req.MaxOutputBytes, g.MaxOutputBytes, DefaultMaxOutputBytes, warnf)
	return e, warn
}

// limit is the requested value (or def) capped by the granted one (or def).
func limit[T int | int64](name string, req, granted, def T, warnf func(string, ...any)) T {
	want := req
	if want == 0 {
		want = def
	}
	ceiling := granted
	if ceiling == 0 {
		ceiling = def
	}
	if want > ceiling {
		if name == "timeout" {
			warnf("timeout %s requested but %s granted", time.Duration(want), time.Duration(ceiling))
		} else {
			warnf("%s %d requested but %d granted", name, want, ceiling)
		}
		return ceiling
	}
	return want
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// String describes the capabilities for `kernel tools`, e.g.
// "fs=/data:ro env=TZ clock memory=64MiB timeout=5s output=1MiB".
func (e *effective) String() string {
	var parts []string
	if len(e.mounts) > 0 {
		ms := make([]string, len(e.mounts))
		for i, m := range e.mounts {
			mode := "rw"
			if m.readOnly {
				mode = "ro"
			}
			ms[i] = m.guest + ":" + mode
		}
		parts = append(parts, "fs="+strings.Join(ms, ","))
	}
	if len(e.env) > 0 {
		ns := make([]string, len(e.env))
		for i, v := range e.env {
			ns[i] = v.name
		}
		parts = append(parts, "env="+strings.Join(ns, ","))
	}
	if e.clock {
		parts = append(parts, "clock")
	}
	if e.random {
		parts = append(parts, "random")
	}
	parts = append(parts, "memory="+formatBytes(int64(e.memoryMB)<<20), "timeout="+e.timeout.String(), "output="+formatBytes(int64(e.maxOutput)))
	return strings.Join(parts, " ")
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
