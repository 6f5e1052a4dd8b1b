//go:build unix

package subprocess

import (
	"strings"
	"testing"
)

// A Go runtime crash report whose traceback is longer than the stderr tail
// keeps its first line: the crash text names what happened, not the last
// goroutine's frames. Written in small pieces, so the report's first line
// is split across writes.
func TestCrashReportOutlivesTheTail(t *testing.T) {
	tb := newTailBuffer(1 << 10)
	stream := "starting\nfatal error: out of memory\n\ngoroutine 1 [running]:\n" +
		strings.Repeat("runtime.gcBgMarkWorker(0x2a1b7dce0150)\n\truntime/mgc.go:1791 +0xeb\n", 200)
	for i := 0; i < len(stream); i += 7 {
		tb.Write([]byte(stream[i:min(i+7, len(stream))]))
	}
	if strings.Contains(tb.String(), "fatal error") {
		t.Fatal("the test's traceback is not longer than the tail")
	}
	if got := tb.Crash(); !strings.HasPrefix(got, "fatal error: out of memory\n") || len(got) > maxCrashText+1 {
		t.Fatalf("report = %.80q… (%d bytes)", got, len(got))
	}
	text := crashText(tb.String(), tb.Crash())
	if !strings.HasPrefix(text, "fatal error: out of memory") {
		t.Fatalf("crash text = %.80q…", text)
	}
	// A report at the very start of the stream counts; a marker inside a
	// line does not; a later report replaces an earlier one.
	tb = newTailBuffer(1 << 10)
	tb.Write([]byte("panic: first\nlog: not a panic: here\n"))
	if got := tb.Crash(); !strings.HasPrefix(got, "panic: first\n") {
		t.Fatalf("report at the start = %q", got)
	}
	tb.Write([]byte("fatal error: second\n"))
	if got := tb.Crash(); got != "fatal error: second\n" {
		t.Fatalf("later report = %q", got)
	}
	// Without a report anywhere, the last lines explain.
	if got := crashText("a\nb\nc\n", ""); got != "a\nb\nc" {
		t.Fatalf("plain tail = %q", got)
	}
}
