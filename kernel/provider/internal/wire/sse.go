// Package wire holds what the HTTP model providers (openai, anthropic)
// share below their APIs: the framing of a server-sent event stream, the
// Retry-After header, and the checks and classifications of their
// configuration and transport errors.
package wire

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// MaxLine caps one line of the event stream; a longer line is a malformed
// stream, not a reason to buffer without bound.
const MaxLine = 16 << 20

// Event is one server-sent event.
type Event struct {
	Name string // the "event:" field; empty for chat completion chunks
	Data []byte // the "data:" fields joined by "\n"; valid until the next call
	Line int    // the line of the first data field, counting from 1
}

// SSEReader frames a text/event-stream body into events. The SDKs'
// stream decoders cannot tell the end of a response ("data: [DONE]",
// "event: message_stop") from a connection closed mid-way (both end the
// stream without error), which is the difference between a finished
// response and a truncated one, so the providers frame the stream here.
type SSEReader struct {
	br     *bufio.Reader
	Line   int    // lines read so far
	Events int    // events returned so far
	data   []byte // reused across events
	long   []byte // reused for lines longer than the bufio buffer
	// OnLine is called for every line read, when set.
	OnLine func()
}

// NewSSEReader returns a reader of the event stream r.
func NewSSEReader(r io.Reader) *SSEReader {
	return &SSEReader{br: bufio.NewReaderSize(r, 16<<10)}
}

// LineTooLongError is a line longer than MaxLine.
type LineTooLongError struct{ Line int }

func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("line %d of the event stream is longer than %d bytes", e.Line, MaxLine)
}

// Next returns the next event. At the end of the body it returns io.EOF, or
// io.ErrUnexpectedEOF when the body ends inside an event. An unterminated
// final event that is exactly "[DONE]" is still returned: some servers do
// not end their last event with a blank line.
func (s *SSEReader) Next() (Event, error) {
	s.data = s.data[:0]
	var ev Event
	hasData := false
	for {
		ln, err := s.readLine()
		if err != nil {
			if err == io.EOF && hasData {
				if IsDone(s.data) {
					ev.Data = s.data
					s.Events++
					return ev, nil
				}
				return Event{}, io.ErrUnexpectedEOF
			}
			return Event{}, err
		}
		if len(ln) == 0 { // a blank line dispatches the event
			if len(s.data) > 0 {
				ev.Data = s.data
				s.Events++
				return ev, nil
			}
			// An event without data is not dispatched (SSE spec).
			ev, hasData = Event{}, false
			s.data = s.data[:0]
			continue
		}
		if ln[0] == ':' {
			continue // a comment, such as OpenRouter's ": OPENROUTER PROCESSING"
		}
		field, value, _ := bytes.Cut(ln, []byte{':'})
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(field) {
		case "data", "error":
			// "error:" is not an SSE field: llama.cpp's server before
			// b4800 or so wrote its in-stream errors that way (a line
			// "error: {...}", then "data: [DONE]"). It is read as the
			// data of an error event.
			if field[0] == 'e' {
				ev.Name = "error"
			}
			if hasData {
				s.data = append(s.data, '\n')
			} else {
				ev.Line = s.Line
				hasData = true
			}
			s.data = append(s.data, value...)
		case "event":
			ev.Name = string(value)
		}
		// id, retry and unknown fields are ignored, as the SSE spec says.
	}
}

// readLine returns the next line without its line ending. The slice is valid
// until the next call. A final line without a line ending is returned before
// io.EOF.
func (s *SSEReader) readLine() ([]byte, error) {
	ln, err := s.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		s.long = append(s.long[:0], ln...)
		for err == bufio.ErrBufferFull {
			if len(s.long) > MaxLine {
				return nil, &LineTooLongError{Line: s.Line + 1}
			}
			ln, err = s.br.ReadSlice('\n')
			s.long = append(s.long, ln...)
		}
		ln = s.long
	}
	if len(ln) > MaxLine {
		return nil, &LineTooLongError{Line: s.Line + 1}
	}
	if err != nil && (err != io.EOF || len(ln) == 0) {
		return nil, err
	}
	s.Line++
	if s.OnLine != nil {
		s.OnLine()
	}
	ln = bytes.TrimSuffix(ln, []byte{'\n'})
	ln = bytes.TrimSuffix(ln, []byte{'\r'})
	return ln, nil
}

// IsDone reports whether data is Chat Completions' end-of-stream marker.
func IsDone(data []byte) bool {
	return bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]"))
}
