package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// parseAge parses an age such as "30d", "2w", "12h" or "90m": a Go
// duration, or a whole number of days (d) or weeks (w). It is the syntax
// of `kernel sessions gc --older-than`.
func parseAge(s string) (time.Duration, error) {
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			v, err := strconv.ParseUint(n, 10, 32)
			if err != nil || v == 0 {
				return 0, fmt.Errorf("age %q: want a positive whole number of %s, like 30d or 2w", s, map[string]string{"d": "days", "w": "weeks"}[suffix])
			}
			return time.Duration(v) * unit, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("age %q: want a positive age like 30d, 2w, 12h or 90m", s)
	}
	return d, nil
}
