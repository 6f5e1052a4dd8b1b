//go:build agentkernel_launcher

package sandbox

import "time"

// Duration in the dedicated launcher's build (the agentkernel_launcher
// tag; grant_yaml.go has the kernel's): the launcher reads durations from
// its spec as nanoseconds and never decodes a grant, so it needs neither
// internal/config nor yaml.v3, whose package initialisers would run at
// every sandbox's start.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }
