//go:build unix

package sdk

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

type closeBuffer struct {
	bytes.Buffer
	closed bool
}

func (b *closeBuffer) Close() error { b.closed = true; return nil }

// TestForwardStdout: only go-plugin's handshake line reaches the host's
// pipe, whatever is printed around it, even on the same line.
func TestForwardStdout(t *testing.T) {
	handshake := "1|1|unix|/tmp/plugin123|grpc|MIIBcert\n"
	for _, tc := range []struct {
		name, in, stderr string
	}{
		{"alone", handshake, ""},
		{"noise around", "noise\n" + handshake + "after\n", "noise\nafter\n"},
		{"noise without newline", "partial" + handshake + "more", "partialmore"},
		{"a lookalike first", "1|1|nope\n" + handshake, "1|1|nope\n"},
		{"a second handshake goes to stderr", handshake + handshake, handshake},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host, stderr := &closeBuffer{}, &closeBuffer{}
			forwardStdout(strings.NewReader(tc.in), host, stderr, "")
			if host.String() != handshake || !host.closed {
				t.Errorf("host got %q (closed %v), want the handshake line", host.String(), host.closed)
			}
			if stderr.String() != tc.stderr {
				t.Errorf("stderr got %q, want %q", stderr.String(), tc.stderr)
			}
		})
	}
	t.Run("long lines do not grow without bound", func(t *testing.T) {
		host, stderr := &closeBuffer{}, &closeBuffer{}
		long := strings.Repeat("x", 200<<10)
		forwardStdout(io.MultiReader(strings.NewReader(long+"\n"), strings.NewReader(handshake)), host, stderr, "")
		if host.String() != handshake || stderr.Len() != len(long)+1 {
			t.Errorf("host %q, stderr %d bytes", host.String(), stderr.Len())
		}
	})
}

// TestWithCert: the SDK's certificate goes into the handshake line's sixth
// field only where go-plugin left it empty.
func TestWithCert(t *testing.T) {
	for _, tc := range []struct{ name, in, cert, want string }{
		{"empty field filled", "1|1|unix|/tmp/p/s|grpc|\n", "CERT", "1|1|unix|/tmp/p/s|grpc|CERT\n"},
		{"seventh field kept", "1|1|unix|/tmp/p/s|grpc||true\n", "CERT", "1|1|unix|/tmp/p/s|grpc|CERT|true\n"},
		{"go-plugin's own kept", "1|1|unix|/tmp/p/s|grpc|THEIRS\n", "CERT", "1|1|unix|/tmp/p/s|grpc|THEIRS\n"},
		{"no certificate of ours", "1|1|unix|/tmp/p/s|grpc|\n", "", "1|1|unix|/tmp/p/s|grpc|\n"},
		{"short line untouched", "1|1|unix|/tmp/p/s\n", "CERT", "1|1|unix|/tmp/p/s\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(withCert([]byte(tc.in), tc.cert)); got != tc.want {
				t.Errorf("withCert(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
