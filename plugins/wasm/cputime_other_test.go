//go:build !unix

package wasm

import "time"

// cpuTime is not measured here.
func cpuTime() time.Duration { return 0 }
