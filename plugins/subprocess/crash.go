package subprocess

import (
	"strings"
)

// maxCrashText bounds the crash text a tool error carries to the model.
const maxCrashText = 2048

// crashText picks what explains a crash: the Go runtime's last "panic: ..."
// or "fatal error: ..." report in the plugin's whole stderr and the start of
// its stack trace (report, kept by tailBuffer), or else the last few lines
// of the stderr tail.
func crashText(tail, report string) string {
	text := strings.TrimRight(report, "\n")
	if text == "" {
		lines := strings.Split(strings.TrimRight(tail, "\n"), "\n")
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
