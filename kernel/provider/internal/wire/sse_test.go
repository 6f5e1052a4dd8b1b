package wire

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestSSEFraming checks the event framing against the SSE rules servers
// rely on.
func TestSSEFraming(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // event data, "name|data" for named events
		end      error
	}{
		{"two events", "data: a\n\ndata: b\n\n", []string{"a", "b"}, io.EOF},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}, io.EOF},
		{"no space after colon", "data:a\n\n", []string{"a"}, io.EOF},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"a\nb"}, io.EOF},
		{"comments and unknown fields", ": keepalive\nid: 7\nretry: 10\nfoo: bar\ndata: a\n\n", []string{"a"}, io.EOF},
		{"named event", "event: error\ndata: x\n\ndata: y\n\n", []string{"error|x", "y"}, io.EOF},
		{"empty data is not dispatched", "data:\n\ndata: a\n\n", []string{"a"}, io.EOF},
		{"blank lines", "\n\n\ndata: a\n\n\n", []string{"a"}, io.EOF},
		{"unterminated DONE", "data: a\n\ndata: [DONE]", []string{"a", "[DONE]"}, io.EOF},
		{"unterminated DONE line", "data: [DONE]\n", []string{"[DONE]"}, io.EOF},
		{"unterminated chunk", "data: a\n\ndata: {\"x\"", []string{"a"}, io.ErrUnexpectedEOF},
		{"cut after data line", "data: a\n\ndata: b\n", []string{"a"}, io.ErrUnexpectedEOF},
		{"long line", "data: " + strings.Repeat("z", 100000) + "\n\n", []string{strings.Repeat("z", 100000)}, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewSSEReader(strings.NewReader(tt.in))
			var got []string
			var err error
			for {
				var ev Event
				ev, err = r.Next()
				if err != nil {
					break
				}
				s := string(ev.Data)
				if ev.Name != "" {
					s = ev.Name + "|" + s
				}
				got = append(got, s)
			}
			if !errors.Is(err, tt.end) {
				t.Errorf("ended with %v, want %v", err, tt.end)
			}
			if strings.Join(got, "¦") != strings.Join(tt.want, "¦") {
				t.Errorf("events %q, want %q", got, tt.want)
			}
		})
	}
}
