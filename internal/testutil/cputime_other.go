//go:build !unix

package testutil

import "time"

// CPUTime is not measured here.
func CPUTime() time.Duration { return 0 }
