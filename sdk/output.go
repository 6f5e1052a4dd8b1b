package sdk

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/agentkernel/agentkernel/tool"
)

// Progress reports how a call is going. The host turns it into a
// tool.progress event; outside a served call it does nothing. Progress is
// safe to call from any goroutine until the handler returns; reports after
// that are dropped.
func Progress(ctx context.Context, text string) {
	tool.ReportProgress(ctx, text)
}

// Progressf is Progress with a format.
func Progressf(ctx context.Context, format string, args ...any) {
	tool.ReportProgress(ctx, fmt.Sprintf(format, args...))
}

// TruncateOutput cuts s to at most max bytes, on a UTF-8 boundary, and
// appends a marker that says how much was cut. It returns s unchanged when
// it fits or when max <= 0. The marker is not counted in max.
func TruncateOutput(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + TruncationMarker(len(s), max)
}

// TruncationMarker is the line TruncateOutput appends to output of total
// bytes cut to max bytes.
func TruncationMarker(total, max int) string {
	return fmt.Sprintf("\n[output truncated: %d bytes, limit %d]", total, max)
}
