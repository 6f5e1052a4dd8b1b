package hooks

import (
	"strings"
	"testing"
)

// TestScrubLines: ScrubLines replaces what Scrub replaces and keeps every
// line where it was, a multi-line private key included; Chain.ScrubResult
// uses it when the scrubber is on and changes nothing when it is off.
func TestScrubLines(t *testing.T) {
	text := "token: ghp_0123456789abcdefghijABCDEFGHIJ012345\n" +
		"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACCDp8o2FdTZ2rBMx4Ds/DjGOXcmsCdRVl2Sv3Pq0VTlCAAAAJiWl1oDlpda\n-----END OPENSSH PRIVATE KEY-----\n" +
		"line six\n"
	s, err := NewScrubber(ScrubberConfig{})
	if err != nil {
		t.Fatal(err)
	}
	plain, n := s.Scrub(text)
	lines := s.ScrubLines(text)
	if n == 0 || strings.Contains(lines, "ghp_") || strings.Contains(lines, "b3BlbnNz") {
		t.Fatalf("ScrubLines left a credential (Scrub found %d):\n%s", n, lines)
	}
	if got, want := strings.Count(lines, "\n"), strings.Count(text, "\n"); got != want {
		t.Fatalf("ScrubLines has %d lines, the text %d:\n%s", got, want, lines)
	}
	if strings.Split(lines, "\n")[5] != "line six" {
		t.Errorf("line six moved:\n%s", lines)
	}
	if strings.ReplaceAll(lines, "\n", "") != strings.ReplaceAll(plain, "\n", "") {
		t.Errorf("ScrubLines and Scrub differ beyond line breaks:\n%s\n---\n%s", lines, plain)
	}

	on, err := NewChain(Config{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if on.ScrubResult(text) != lines {
		t.Error("ScrubResult with the scrubber on is not ScrubLines")
	}
	off := false
	offChain, err := NewChain(Config{Scrubber: ScrubberConfig{Enabled: &off}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if offChain.ScrubResult(text) != text {
		t.Error("ScrubResult with the scrubber off changed the text")
	}
}
