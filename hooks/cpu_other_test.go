//go:build !unix

package hooks

import "time"

// processCPU is not measured here.
func processCPU() time.Duration { return 0 }
