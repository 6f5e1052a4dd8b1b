package subprocess

import (
	"strings"
)

// maxCrashText bounds the crash text a tool error carries to the model.
const maxCrashText = 2048

// crashText picks what explains a crash out of the tail of a plugin's
// stderr: the Go runtime's "panic: ..." or "fatal error: ..." report and
// the start of its stack trace, or else report (the last report the whole
// stream had, when a long traceback pushed it out of the tail), or else
// the last few lines.
func crashText(stderr, report string) string {
	stderr = strings.TrimRight(stderr, "\n")
	if stderr == "" {
		return ""
	}
	start := -1
	for _, marker := range []string{"panic: ", "fatal error: "} {
		if i := lastLineStart(stderr, marker); i > start {
			start = i
		}
	}
	var text string
	switch {
	case start >= 0:
		text = stderr[start:]
	case report != "":
		text = strings.TrimRight(report, "\n")
	default:
		lines := strings.Split(stderr, "\n")
		if len(lines) > 8 {
			lines = lines[len(lines)-8:]
		}
		text = strings.Join(lines, "\n")
	}
	if len(text) > maxCrashText {
		text = text[:maxCrashText] + "\n..."
	}
	return text
}

// lastLineStart returns the index of the last line of s that starts with
// prefix, or -1.
func lastLineStart(s, prefix string) int {
	if i := strings.LastIndex(s, "\n"+prefix); i >= 0 {
		return i + 1
	}
	if strings.HasPrefix(s, prefix) {
		return 0
	}
	return -1
}
