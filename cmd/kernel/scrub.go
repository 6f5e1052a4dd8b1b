package main

import (
	"errors"
	"io"

	"github.com/agentkernel/agentkernel/hooks"
)

// defaultScrubber is the credential scrubber with its default settings. It
// scrubs what the CLI prints and writes outside the hook chain (errors,
// events, log lines) whenever the configured one is not at hand; the
// configured one adds its extra patterns on top.
var defaultScrubber = func() *hooks.Scrubber {
	s, err := hooks.NewScrubber(hooks.ScrubberConfig{Known: &heldSecrets})
	if err != nil {
		panic("default scrubber: " + err.Error()) // no patterns: cannot fail
	}
	return s
}()

// scrubText redacts credentials in s with the default scrubber.
func scrubText(s string) string {
	out, _ := defaultScrubber.Scrub(s)
	return out
}

// scrubbedError is an error whose message went through the scrubber; it
// still unwraps to the original, so errors.Is and errors.As work.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrubError returns err with its message scrubbed (nil stays nil, and an
// exitError keeps its type so the exit code survives).
func scrubError(err error) error {
	if err == nil {
		return nil
	}
	var ee exitError
	if errors.As(err, &ee) {
		ee.msg = scrubText(ee.msg)
		return ee
	}
	msg := err.Error()
	if s := scrubText(msg); s != msg {
		return &scrubbedError{msg: s, err: err}
	}
	return err
}

// scrubString redacts credentials with the configured scrubber when the
// renderer has one, else with the default one.
func (r *renderer) scrubString(s string) string {
	if r.scrub != nil {
		return r.scrub(s)
	}
	return scrubText(s)
}

// scrubBytes is scrubString for a JSON event line. Markers are plain ASCII
// without quotes or backslashes, so the line stays valid JSON.
func (r *renderer) scrubBytes(b []byte) []byte {
	s := string(b)
	if out := r.scrubString(s); out != s {
		return []byte(out)
	}
	return b
}

// scrubWriter scrubs every write (one log line each) before passing it on.
type scrubWriter struct{ w io.Writer }

func (s scrubWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.w, scrubText(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// isEnvName reports whether s can name an environment variable.
func isEnvName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return s != ""
}
