package sandbox

import (
	"errors"
	"sync"
)

// Stats counts what the sandbox did in this process, for metrics.
type Stats struct {
	// Starts counts confined processes set up (Command,
	// CommandPrestarted).
	Starts int64
	// Denials counts processes refused because a layer they need is
	// missing, by layer.
	Denials map[string]int64
	// LimitHits counts processes a limit of their grant stopped, by limit
	// (the LimitError's Limit).
	LimitHits map[string]int64
}

var stats struct {
	mu sync.Mutex
	s  Stats
}

// Counters reports the process's counters. Safe for concurrent use.
func Counters() Stats {
	stats.mu.Lock()
	defer stats.mu.Unlock()
	out := Stats{Starts: stats.s.Starts, Denials: map[string]int64{}, LimitHits: map[string]int64{}}
	for k, v := range stats.s.Denials {
		out.Denials[k] = v
	}
	for k, v := range stats.s.LimitHits {
		out.LimitHits[k] = v
	}
	return out
}

// countSetup counts a Command's outcome: a start, or a denial for a
// missing layer.
func countSetup(err error) {
	var ml *MissingLayerError
	stats.mu.Lock()
	defer stats.mu.Unlock()
	switch {
	case err == nil:
		stats.s.Starts++
	case errors.As(err, &ml):
		if stats.s.Denials == nil {
			stats.s.Denials = map[string]int64{}
		}
		stats.s.Denials[string(ml.Layer)]++
	}
}

// countLimit counts a process a limit stopped.
func countLimit(l *LimitError) {
	if l == nil {
		return
	}
	stats.mu.Lock()
	defer stats.mu.Unlock()
	if stats.s.LimitHits == nil {
		stats.s.LimitHits = map[string]int64{}
	}
	stats.s.LimitHits[l.Limit]++
}
