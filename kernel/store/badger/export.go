package badger

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/agentkernel/agentkernel/kernel"
)

// ExportVersion is the version of the export format that Export writes
// and Import reads (schemas/session-export.schema.json).
const ExportVersion = 1

// maxLine bounds one line of an import: a message of up to 64 MiB.
const maxLine = 64 << 20

// exportHeader is the first line of an export.
type exportHeader struct {
	Type    string             `json:"type"` // "session"
	Version int                `json:"version"`
	Meta    kernel.SessionMeta `json:"meta"`
	Pending *kernel.Approval   `json:"pending,omitempty"`
}

// exportMessage is every other line: a kernel.Message and its type.
type exportMessage struct {
	Type string `json:"type"` // "message"
	kernel.Message
}

// Export writes session id as JSON Lines: a header line
// {"type":"session","version":1,"meta":{…},"pending":{…}} and then one
// {"type":"message",…} line per message, in order. The schema of a line is
// schemas/session-export.schema.json. On error the output is incomplete.
func (s *Store) Export(ctx context.Context, id string, w io.Writer) error {
	se, err := s.Load(ctx, id)
	if err != nil {
		return fmt.Errorf("export session: %w", err)
	}
	return WriteExport(ctx, w, se)
}

// WriteExport writes se in the format of Export, for any store: the
// postgres store's export is byte for byte the badger store's.
func WriteExport(ctx context.Context, w io.Writer, se *kernel.Session) error {
	id := se.Meta.ID
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(exportHeader{Type: "session", Version: ExportVersion, Meta: se.Meta, Pending: se.Pending}); err != nil {
		return fmt.Errorf("export session %s: %w", id, err)
	}
	for i, m := range se.Messages {
		if i%1024 == 0 && ctx.Err() != nil {
			return fmt.Errorf("export session %s: %w", id, ctx.Err())
		}
		if err := enc.Encode(exportMessage{Type: "message", Message: m}); err != nil {
			return fmt.Errorf("export session %s: message %d: %w", id, m.Seq, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export session %s: %w", id, err)
	}
	return nil
}

// ImportError is an import file that does not hold a valid session; Line
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

// Import reads a session written by Export, checks all of it, and stores
// it under the id of its header (a new id when the header has none). It
// returns the id. Any problem is an *ImportError naming the line, and
// nothing is stored; a session with the same id fails with
// ErrSessionExists.
func (s *Store) Import(ctx context.Context, r io.Reader) (id string, err error) {
	if s.opts.ReadOnly {
		return "", fmt.Errorf("import session: %w", ErrReadOnly)
	}
	h, msgs, err := parseExport(ctx, r)
	if err != nil {
		return "", err
	}
	id = h.Meta.ID
	if id == "" {
		id = kernel.NewID()
	}
	meta := h.Meta
	meta.ID = id
	metaVal, err := encodeMeta(&meta)
	if err != nil {
		return "", fmt.Errorf("import session %s: %w", id, err)
	}
	var pendVal []byte
	if h.Pending != nil {
		h.Pending.SessionID = id
		if pendVal, err = encodePending(h.Pending); err != nil {
			return "", fmt.Errorf("import session %s: %w", id, err)
		}
	}
	vals := make([][]byte, len(msgs))
	size := int64(len(metaVal) + len(pendVal))
	for i := range msgs {
		vals[i] = encodeMessage(nil, &msgs[i])
		size += int64(len(vals[i]))
	}
	if err := s.checkSpace(size, false); err != nil {
		return "", fmt.Errorf("import session %s: %w", id, err)
	}

	mu := s.locks.of(id)
	mu.Lock()
	defer mu.Unlock()
	err = s.db.View(func(txn *bdg.Txn) error {
		_, err := txn.Get(metaKey(id))
		if err == nil {
			return fmt.Errorf("session %q: %w (remove it first)", id, ErrSessionExists)
		}
		if errors.Is(err, bdg.ErrKeyNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("import session: %w", err)
	}
	// Messages first, metadata last: until the metadata is written the
	// messages are invisible, so a failed import stores nothing.
	txn := s.db.NewTransaction(true)
	err = s.commitLarge(&txn, id, msgs, vals, func(txn *bdg.Txn) error {
		if pendVal != nil {
			if err := txn.Set(pendingKey(id), pendVal); err != nil {
				return err
			}
		}
		return txn.Set(metaKey(id), metaVal)
	})
	if err == nil {
		err = txn.Commit()
	}
	txn.Discard()
	if err != nil {
		if derr := s.deleteMessages(context.WithoutCancel(ctx), id, 1); derr != nil {
			s.opts.Logger.Warn("could not remove the messages of a failed import; gc will", "session", id, "error", derr)
		}
		return "", fmt.Errorf("import session %s: %w", id, err)
	}
	return id, nil
}

// ReadExport reads and checks a session written by Export, as Import does,
// without storing it: `kernel policy diff --exports DIR` re-decides the
// sessions of a directory of exports. A problem is an *ImportError naming
// the line.
func ReadExport(ctx context.Context, r io.Reader) (*kernel.Session, error) {
	h, msgs, err := parseExport(ctx, r)
	if err != nil {
		return nil, err
	}
	return &kernel.Session{Meta: h.Meta, Messages: msgs, Pending: h.Pending}, nil
}

// parseExport reads and checks an export.
func parseExport(ctx context.Context, r io.Reader) (exportHeader, []kernel.Message, error) {
	var h exportHeader
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
		var m exportMessage
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

func checkHeader(h *exportHeader) error {
	if h.Version != ExportVersion {
		return fmt.Errorf("version %d is not supported (this kernel reads version %d)", h.Version, ExportVersion)
	}
	if h.Meta.ID != "" {
		if err := checkID(h.Meta.ID); err != nil {
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

func checkMessage(m *exportMessage, want uint64) error {
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
