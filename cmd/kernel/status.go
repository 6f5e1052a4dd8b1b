package main

import (
	"fmt"
	"io"
	"time"

	"github.com/agentkernel/agentkernel/internal/progress"
)

// statusLine shows what is being done on w while it lasts more than two
// seconds, if w is a terminal (internal/progress), with the bytes c has
// moved when c is set. It returns the function that ends the line.
func statusLine(w io.Writer, what string, c *progress.Counter) func() {
	l := progress.Start(w, statusAfter, func(el time.Duration) string {
		if c != nil {
			return fmt.Sprintf("%s · %s · %s", what, humanBytes(c.N()), progress.Seconds(el))
		}
		return fmt.Sprintf("%s · %s", what, progress.Seconds(el))
	})
	return l.Stop
}

// statusAfter is how long work runs before its status line shows (tests
// shorten it).
var statusAfter = progress.DefaultAfter
