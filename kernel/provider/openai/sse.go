package openai

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// maxLine caps one line of the event stream; a longer line is a malformed
// stream, not a reason to buffer without bound.
const maxLine = 16 << 20

// sseEvent is one server-sent event.
type sseEvent struct {
	name string // the "event:" field; empty for chat completion chunks
	data []byte // the "data:" fields joined by "\n"; valid until the next call
	line int    // the line of the first data field, counting from 1
}

// sseReader frames a text/event-stream body into events. openai-go's
// ssestream decoder cannot tell "data: [DONE]" from a connection closed
// mid-way (both end the stream without error), which is the difference
// between a finished response and a truncated one, so the framing lives here.
type sseReader struct {
	br     *bufio.Reader
	line   int    // lines read so far
	events int    // events returned so far
	data   []byte // reused across events
	long   []byte // reused for lines longer than the bufio buffer
	onLine func() // called for every line read, when set
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, 16<<10)}
}

// lineTooLongError is a line longer than maxLine.
type lineTooLongError struct{ line int }

func (e *lineTooLongError) Error() string {
	return fmt.Sprintf("line %d of the event stream is longer than %d bytes", e.line, maxLine)
}

// next returns the next event. At the end of the body it returns io.EOF, or
// io.ErrUnexpectedEOF when the body ends inside an event. An unterminated
// final event that is exactly "[DONE]" is still returned: some servers do
// not end their last event with a blank line.
func (s *sseReader) next() (sseEvent, error) {
	s.data = s.data[:0]
	var ev sseEvent
	hasData := false
	for {
		ln, err := s.readLine()
		if err != nil {
			if err == io.EOF && hasData {
				if isDone(s.data) {
					ev.data = s.data
					s.events++
					return ev, nil
				}
				return sseEvent{}, io.ErrUnexpectedEOF
			}
			return sseEvent{}, err
		}
		if len(ln) == 0 { // a blank line dispatches the event
			if len(s.data) > 0 {
				ev.data = s.data
				s.events++
				return ev, nil
			}
			// An event without data is not dispatched (SSE spec).
			ev, hasData = sseEvent{}, false
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
				ev.name = "error"
			}
			if hasData {
				s.data = append(s.data, '\n')
			} else {
				ev.line = s.line
				hasData = true
			}
			s.data = append(s.data, value...)
		case "event":
			ev.name = string(value)
		}
		// id, retry and unknown fields are ignored, as the SSE spec says.
	}
}

// readLine returns the next line without its line ending. The slice is valid
// until the next call. A final line without a line ending is returned before
// io.EOF.
func (s *sseReader) readLine() ([]byte, error) {
	ln, err := s.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		s.long = append(s.long[:0], ln...)
		for err == bufio.ErrBufferFull {
			if len(s.long) > maxLine {
				return nil, &lineTooLongError{line: s.line + 1}
			}
			ln, err = s.br.ReadSlice('\n')
			s.long = append(s.long, ln...)
		}
		ln = s.long
	}
	if len(ln) > maxLine {
		return nil, &lineTooLongError{line: s.line + 1}
	}
	if err != nil && (err != io.EOF || len(ln) == 0) {
		return nil, err
	}
	s.line++
	if s.onLine != nil {
		s.onLine()
	}
	ln = bytes.TrimSuffix(ln, []byte{'\n'})
	ln = bytes.TrimSuffix(ln, []byte{'\r'})
	return ln, nil
}

// isDone reports whether data is the end-of-stream marker.
func isDone(data []byte) bool {
	return bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]"))
}
