// Package export is the session export format every store shares: JSON
// Lines, a header line with the session's metadata and pending approval,
// then one line per message. Its schema is
// schemas/session-export.schema.json (every line Write produces is held to
// it by a test); `kernel sessions export` and `import`, `kernel store
// copy`, `GET /v1/sessions/{id}/export` and `kernel policy diff --exports`
// read and write it through this package, so an export of one store
// imports into another byte for byte.
package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/internal/rules"
)

// Version is the version of the format that Write writes and Read reads.
const Version = 1

// maxLine bounds one line: a message of up to 64 MiB.
const maxLine = 64 << 20

// header is the first line.
type header struct {
	Type    string             `json:"type"` // "session"
	Version int                `json:"version"`
	Meta    kernel.SessionMeta `json:"meta"`
	Pending *kernel.Approval   `json:"pending,omitempty"`
}

// message is every other line: a kernel.Message and its type.
type message struct {
	Type string `json:"type"` // "message"
	kernel.Message
}

// Write writes se as JSON Lines: a header line
// {"type":"session","version":1,"meta":{…},"pending":{…}} and then one
// {"type":"message",…} line per message, in order. On error the output is
// incomplete.
func Write(ctx context.Context, w io.Writer, se *kernel.Session) error {
	id := se.Meta.ID
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(header{Type: "session", Version: Version, Meta: se.Meta, Pending: se.Pending}); err != nil {
		return fmt.Errorf("export session %s: %w", id, err)
	}
	for i, m := range se.Messages {
		if i%1024 == 0 && ctx.Err() != nil {
			return fmt.Errorf("export session %s: %w", id, ctx.Err())
		}
		if err := enc.Encode(message{Type: "message", Message: m}); err != nil {
			return fmt.Errorf("export session %s: message %d: %w", id, m.Seq, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export session %s: %w", id, err)
	}
	return nil
}

// ImportError is an export file that does not hold a valid session; Line
// is 1-based (0 when the problem is the file as a whole).
type ImportError struct {
	Line int
	Err  error
}

func (e *ImportError) Error() string {
	if e.Line == 0 {
		return "import session: " + e.Err.Error()
	}
	return fmt.Sprintf("import session: line %d: %v", e.Line, e.Err)
}

func (e *ImportError) Unwrap() error { return e.Err }

// Read reads and checks all of an export: the header (its version, id,
// status and pending approval), every message (numbered 1, 2, 3, … with
// the fields its role allows) and the history (every tool result answers
// an open call, once; only the last assistant message may have calls
// without a result). A problem is an *ImportError naming the line. The
// session's id is the header's (empty when the header has none).
func Read(ctx context.Context, r io.Reader) (*kernel.Session, error) {
	h, msgs, err := parse(ctx, r)
	if err != nil {
		return nil, err
	}
	return &kernel.Session{Meta: h.Meta, Messages: msgs, Pending: h.Pending}, nil
}

// parse reads and checks an export.
func parse(ctx context.Context, r io.Reader) (header, []kernel.Message, error) {
	var h header
	var msgs []kernel.Message
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	line := 0
	for {
		if line%1024 == 0 && ctx.Err() != nil {
			return h, nil, ctx.Err()
		}
		b, err := readLine(br, &buf)
		if err == io.EOF {
			break
		}
		line++
		if err != nil {
			return h, nil, &ImportError{Line: line, Err: err}
		}
		if len(bytes.TrimSpace(b)) == 0 {
			if _, err := br.Peek(1); err == io.EOF {
				break // a blank last line
			}
			return h, nil, &ImportError{Line: line, Err: errors.New("empty line")}
		}
		var kind struct {
			Type string `json:"type"`
		}
		if t := bytes.TrimLeft(b, " \t"); t[0] != '{' {
			return h, nil, &ImportError{Line: line, Err: fmt.Errorf("not a JSON object (it starts with %q)", t[0])}
		}
		if err := json.Unmarshal(b, &kind); err != nil {
			return h, nil, &ImportError{Line: line, Err: fmt.Errorf("invalid JSON: %w", err)}
		}
		if line == 1 && kind.Type != "session" {
			return h, nil, &ImportError{Line: 1, Err: fmt.Errorf(`type is %q; the first line must be the session header, {"type":"session",...}`, kind.Type)}
		}
		if line > 1 && kind.Type != "message" {
			return h, nil, &ImportError{Line: line, Err: fmt.Errorf(`type is %q; every line after the first must be a message, {"type":"message",...}`, kind.Type)}
		}
		if line == 1 {
			if err := decodeStrict(b, &h); err != nil {
				return h, nil, &ImportError{Line: 1, Err: fmt.Errorf("session header: %w", err)}
			}
			if err := checkHeader(&h); err != nil {
				return h, nil, &ImportError{Line: 1, Err: err}
			}
			continue
		}
		var m message
		if err := decodeStrict(b, &m); err != nil {
			return h, nil, &ImportError{Line: line, Err: err}
		}
		if err := checkMessage(&m, uint64(len(msgs)+1)); err != nil {
			return h, nil, &ImportError{Line: line, Err: err}
		}
		msgs = append(msgs, m.Message)
	}
	if h.Type == "" {
		return h, nil, &ImportError{Err: errors.New("no session header: the input is empty")}
	}
	if h.Meta.LastSeq != uint64(len(msgs)) {
		return h, nil, &ImportError{Line: 1, Err: fmt.Errorf("meta.last_seq is %d but %d messages follow", h.Meta.LastSeq, len(msgs))}
	}
	if err := checkHistory(msgs, h.Pending); err != nil {
		return h, nil, err
	}
	return h, msgs, nil
}

// readLine returns the next line of br without its newline; the slice is
// valid until the next call.
func readLine(br *bufio.Reader, buf *[]byte) ([]byte, error) {
	*buf = (*buf)[:0]
	for {
		frag, err := br.ReadSlice('\n')
		if len(*buf)+len(frag) > maxLine {
			return nil, fmt.Errorf("longer than %d MiB", maxLine>>20)
		}
		*buf = append(*buf, frag...)
		switch {
		case err == nil:
			return bytes.TrimSuffix((*buf)[:len(*buf)-1], []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(*buf) > 0:
			return *buf, nil
		default:
			return nil, err
		}
	}
}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

func checkHeader(h *header) error {
	if h.Version != Version {
		return fmt.Errorf("version %d is not supported (this kernel reads version %d)", h.Version, Version)
	}
	if h.Meta.ID != "" {
		if err := rules.CheckID(h.Meta.ID); err != nil {
			return fmt.Errorf("meta.id: %w", err)
		}
	}
	switch h.Meta.Status {
	case kernel.StatusIdle, kernel.StatusRunning, kernel.StatusAwaitingApproval, kernel.StatusFailed:
	default:
		return fmt.Errorf("meta.status %q is not one of idle, running, awaiting_approval, failed", h.Meta.Status)
	}
	if h.Pending != nil {
		if h.Pending.Call.ID == "" {
			return errors.New("pending.call.id is empty")
		}
		if h.Pending.SessionID != "" && h.Meta.ID != "" && h.Pending.SessionID != h.Meta.ID {
			return fmt.Errorf("pending.session_id %q is not meta.id %q", h.Pending.SessionID, h.Meta.ID)
		}
	}
	return nil
}

func checkMessage(m *message, want uint64) error {
	if m.Seq != want {
		return fmt.Errorf("seq is %d, want %d (messages are numbered 1, 2, 3, ... in order)", m.Seq, want)
	}
	switch m.Role {
	case kernel.RoleUser, kernel.RoleAssistant, kernel.RoleSystem:
		if m.ToolCallID != "" || m.ToolName != "" {
			return fmt.Errorf("a %s message has tool_call_id or tool_name; only tool messages do", m.Role)
		}
	case kernel.RoleTool:
		if m.ToolCallID == "" {
			return errors.New("a tool message needs tool_call_id")
		}
	case kernel.RoleCompaction:
		if _, err := kernel.ParseCompaction(&m.Message); err != nil {
			return err
		}
	default:
		return fmt.Errorf("role %q is not one of user, assistant, tool, system, compaction", m.Role)
	}
	if len(m.ToolCalls) > 0 && m.Role != kernel.RoleAssistant {
		return fmt.Errorf("a %s message has tool_calls; only assistant messages do", m.Role)
	}
	for i, c := range m.ToolCalls {
		if c.ID == "" || c.Name == "" {
			return fmt.Errorf("tool_calls[%d] needs an id and a name", i)
		}
	}
	return nil
}

// checkHistory checks what a provider needs of a history: every tool
// message answers a call of the assistant message before it, once, and
// only the last assistant message may have calls without a result (the
// kernel completes them as interrupted on load, or one of them is the
// pending approval).
func checkHistory(msgs []kernel.Message, pending *kernel.Approval) error {
	open := map[string]bool{}
	line := func(i int) int { return i + 2 }
	for i, m := range msgs {
		if m.Role == kernel.RoleTool {
			if !open[m.ToolCallID] {
				return &ImportError{Line: line(i), Err: fmt.Errorf("tool message answers call %q, which the assistant message before it did not make or which is already answered", m.ToolCallID)}
			}
			delete(open, m.ToolCallID)
			continue
		}
		if len(open) > 0 {
			return &ImportError{Line: line(i), Err: fmt.Errorf("%d tool calls of the assistant message before this %s message have no result", len(open), m.Role)}
		}
		for _, c := range m.ToolCalls {
			if open[c.ID] {
				return &ImportError{Line: line(i), Err: fmt.Errorf("tool call id %q appears twice", c.ID)}
			}
			open[c.ID] = true
		}
	}
	if pending != nil && !open[pending.Call.ID] {
		return &ImportError{Line: 1, Err: fmt.Errorf("pending approval for call %q, which is not a call of the last assistant message awaiting a result", pending.Call.ID)}
	}
	return nil
}
