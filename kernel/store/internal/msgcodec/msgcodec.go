// Package msgcodec is the compact binary encoding of a kernel.Message that
// both stores keep their messages in: the badger store as its values, the
// postgres store in ak_messages.body (beside the JSON rows written before
// it, which it still reads). Decoding it is about ten times cheaper than
// decoding the message's JSON (RATIONALE.md, "One message codec for both
// stores").
package msgcodec

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// A message's value is
//
//	[1 byte version] [payload] [4 bytes CRC-32C of version+payload, big-endian]
//
// The payload (version 1) is binary: uvarint-length-prefixed strings and
// uvarints, in this order:
//
//	role, flags (bit 0 is_error, bit 1 has time, bit 2 has approval, bit 3
//	has more), [unix seconds (varint), nanoseconds (uvarint)], content,
//	reasoning, tool_call_id, tool_name, number of tool calls, then id,
//	name, arguments of each call, [approval: id, by, note, bits (uvarint: 1
//	approved, 2 expired)], [more: model, reasoning_field, failed,
//	protocol.raw, protocol.correction], [blocks (bit 4): the number of
//	reasoning blocks, then provider, index (uvarint) and data of each],
//	[hooks (bit 5): the JSON of kernel.HookRecord (rare, and free to grow
//	fields)], [child (bit 6): the JSON of kernel.ChildRun]
//
// The optional parts are written only when set (their flag bit), so a
// message without them is encoded as before they existed. The message's
// Seq is not stored: the store's key carries it. The first byte is never
// '{', so a store that once kept the message's JSON tells the two apart
// by it (IsJSON).
const (
	Version = 1

	FlagIsError     = 1 << 0
	FlagHasTime     = 1 << 1
	FlagHasApproval = 1 << 2
	FlagHasMore     = 1 << 3
	FlagHasBlocks   = 1 << 4
	FlagHasHooks    = 1 << 5
	// FlagHasChild: the message answers an agent call, and the JSON of
	// its kernel.ChildRun follows (small, and free to grow fields).
	FlagHasChild = 1 << 6
)

// maxBlockIndex bounds a reasoning block's index: no answer has more
// content blocks.
const maxBlockIndex = 1 << 20

// Castagnoli is the CRC-32C table of the values' checksums.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// The causes a damaged value is reported with, in the words `sessions
// fsck` and a session's placeholder show: what happened to the bytes, not
// how the codec noticed.
var (
	ErrTruncated = errors.New("damaged on disk: the value is cut short")
	ErrChecksum  = errors.New("damaged on disk: the value's bytes changed after they were written (checksum mismatch)")
)

// IsJSON reports whether a stored message is the message's JSON (what the
// postgres store wrote before this codec) rather than this encoding.
func IsJSON(b []byte) bool { return len(b) > 0 && b[0] == '{' }

// Seal appends the checksum of b[start:].
func Seal(b []byte, start int) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], Castagnoli))
}

// Unseal checks the version byte and the checksum and returns the payload.
func Unseal(b []byte, version byte) ([]byte, error) {
	if len(b) < 5 {
		return nil, fmt.Errorf("%w (%d bytes, a value has at least 5)", ErrTruncated, len(b))
	}
	n := len(b) - 4
	if got, want := binary.BigEndian.Uint32(b[n:]), crc32.Checksum(b[:n], Castagnoli); got != want {
		return nil, fmt.Errorf("%w: stored %08x, computed %08x", ErrChecksum, got, want)
	}
	if b[0] != version {
		return nil, fmt.Errorf("unknown encoding version %d (this kernel reads version %d; a newer kernel wrote it?)", b[0], version)
	}
	return b[1:n], nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Append appends the value of m to b.
func Append(b []byte, m *kernel.Message) []byte {
	start := len(b)
	b = append(b, Version)
	b = appendString(b, string(m.Role))
	var flags uint64
	if m.IsError {
		flags |= FlagIsError
	}
	if !m.Time.IsZero() {
		flags |= FlagHasTime
	}
	if m.Approval != nil {
		flags |= FlagHasApproval
	}
	more := m.Model != "" || m.ReasoningField != "" || m.Failed != "" || m.Protocol != nil
	if more {
		flags |= FlagHasMore
	}
	if len(m.ReasoningBlocks) > 0 {
		flags |= FlagHasBlocks
	}
	var hooks []byte
	if m.Hooks != nil {
		flags |= FlagHasHooks
		hooks, _ = json.Marshal(m.Hooks) // strings, ints: cannot fail
	}
	var child []byte
	if m.Child != nil {
		child, _ = json.Marshal(m.Child) // plain fields: Marshal cannot fail
		flags |= FlagHasChild
	}
	b = binary.AppendUvarint(b, flags)
	if !m.Time.IsZero() {
		b = binary.AppendVarint(b, m.Time.Unix())
		b = binary.AppendUvarint(b, uint64(m.Time.Nanosecond()))
	}
	b = appendString(b, m.Content)
	b = appendString(b, m.Reasoning)
	b = appendString(b, m.ToolCallID)
	b = appendString(b, m.ToolName)
	b = binary.AppendUvarint(b, uint64(len(m.ToolCalls)))
	for _, c := range m.ToolCalls {
		b = appendString(b, c.ID)
		b = appendString(b, c.Name)
		b = appendString(b, c.Arguments)
	}
	if a := m.Approval; a != nil {
		b = appendString(b, a.ID)
		b = appendString(b, a.By)
		b = appendString(b, a.Note)
		var bits uint64
		if a.Approved {
			bits |= 1
		}
		if a.Expired {
			bits |= 2
		}
		b = binary.AppendUvarint(b, bits)
	}
	if more {
		b = appendString(b, m.Model)
		b = appendString(b, m.ReasoningField)
		b = appendString(b, m.Failed)
		b = appendString(b, m.RawText())
		b = appendString(b, m.CorrectionKind())
	}
	if len(m.ReasoningBlocks) > 0 {
		b = binary.AppendUvarint(b, uint64(len(m.ReasoningBlocks)))
		for _, rb := range m.ReasoningBlocks {
			b = appendString(b, rb.Provider)
			b = binary.AppendUvarint(b, uint64(rb.Index))
			b = binary.AppendUvarint(b, uint64(len(rb.Data)))
			b = append(b, rb.Data...)
		}
	}
	if m.Hooks != nil {
		b = appendString(b, string(hooks))
	}
	if child != nil {
		b = appendString(b, string(child))
	}
	return Seal(b, start)
}

// Size is an upper bound of the size of m's value.
func Size(m *kernel.Message) int {
	n := 1 + 4 + 2*binary.MaxVarintLen64 + 1 + 11*binary.MaxVarintLen64 +
		len(m.Role) + len(m.Content) + len(m.Reasoning) + len(m.ToolCallID) + len(m.ToolName) +
		len(m.Model) + len(m.ReasoningField) + len(m.Failed) + len(m.RawText()) + len(m.CorrectionKind())
	if m.Child != nil {
		c, _ := json.Marshal(m.Child)
		n += binary.MaxVarintLen64 + len(c)
	}
	for _, c := range m.ToolCalls {
		n += 3*binary.MaxVarintLen64 + len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	if a := m.Approval; a != nil {
		n += 4*binary.MaxVarintLen64 + len(a.ID) + len(a.By) + len(a.Note)
	}
	if len(m.ReasoningBlocks) > 0 {
		n += binary.MaxVarintLen64
		for _, rb := range m.ReasoningBlocks {
			n += 3*binary.MaxVarintLen64 + len(rb.Provider) + len(rb.Data)
		}
	}
	if h := m.Hooks; h != nil {
		n += binary.MaxVarintLen64 + 64
		for _, x := range h.Notes {
			n += 96 + len(x.Hook) + len(x.Point) + len(x.What) + 2*len(x.Reason)
		}
		for _, e := range h.Edits {
			n += 64 + len(e.Hook) + 2*len(e.Content)
		}
	}
	return n
}

// reader decodes a payload held in a string, so every decoded string is a
// substring of one allocation.
type reader struct {
	s   string
	off int
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	var x uint64
	var shift uint
	for i := 0; i < binary.MaxVarintLen64; i++ {
		if r.off >= len(r.s) {
			r.err = ErrTruncated
			return 0
		}
		c := r.s[r.off]
		r.off++
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			return x | uint64(c)<<shift
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	r.err = errors.New("varint overflows 64 bits")
	return 0
}

func (r *reader) varint() int64 {
	ux := r.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

func (r *reader) str() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.s)-r.off) {
		r.err = fmt.Errorf("%w: a string of %d bytes with %d bytes left", ErrTruncated, n, len(r.s)-r.off)
		return ""
	}
	s := r.s[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

// Decode decodes a message value into m (without its Seq).
func Decode(b []byte, m *kernel.Message) error {
	p, err := Unseal(b, Version)
	if err != nil {
		return err
	}
	r := reader{s: string(p)}
	m.Role = kernel.Role(r.str())
	flags := r.uvarint()
	if flags&^(FlagIsError|FlagHasTime|FlagHasApproval|FlagHasMore|FlagHasBlocks|FlagHasHooks|FlagHasChild) != 0 && r.err == nil {
		return fmt.Errorf("unknown message flags %#x", flags)
	}
	m.IsError = flags&FlagIsError != 0
	if flags&FlagHasTime != 0 {
		sec := r.varint()
		nsec := r.uvarint()
		if nsec >= 1e9 && r.err == nil {
			return fmt.Errorf("time has %d nanoseconds", nsec)
		}
		m.Time = time.Unix(sec, int64(nsec)).UTC()
	}
	m.Content = r.str()
	m.Reasoning = r.str()
	m.ToolCallID = r.str()
	m.ToolName = r.str()
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.s)-r.off)/3 {
		return fmt.Errorf("%w: %d tool calls with %d bytes left", ErrTruncated, n, len(r.s)-r.off)
	}
	if n > 0 {
		m.ToolCalls = make([]kernel.ToolCall, n)
		for i := range m.ToolCalls {
			m.ToolCalls[i] = kernel.ToolCall{ID: r.str(), Name: r.str(), Arguments: r.str()}
		}
	}
	if flags&FlagHasApproval != 0 {
		a := &kernel.ApprovalRecord{ID: r.str(), By: r.str(), Note: r.str()}
		bits := r.uvarint()
		a.Approved, a.Expired = bits&1 != 0, bits&2 != 0
		m.Approval = a
	}
	if flags&FlagHasMore != 0 {
		m.Model = r.str()
		m.ReasoningField = r.str()
		m.Failed = r.str()
		if raw, fix := r.str(), r.str(); raw != "" || fix != "" {
			m.Protocol = &kernel.ProtocolNote{Raw: raw, Correction: fix}
		}
	}
	if flags&FlagHasBlocks != 0 {
		n := r.uvarint()
		if r.err == nil && n > uint64(len(r.s)-r.off)/3 {
			return fmt.Errorf("%w: %d reasoning blocks with %d bytes left", ErrTruncated, n, len(r.s)-r.off)
		}
		if n > 0 {
			m.ReasoningBlocks = make([]kernel.ReasoningBlock, n)
		}
		for i := range m.ReasoningBlocks {
			rb := &m.ReasoningBlocks[i]
			rb.Provider = r.str()
			idx := r.uvarint()
			if idx > maxBlockIndex && r.err == nil {
				return fmt.Errorf("reasoning block %d has index %d (at most %d)", i, idx, maxBlockIndex)
			}
			rb.Index = int(idx)
			// Bytes of their own: a block must not alias the payload.
			if d := r.str(); d != "" {
				rb.Data = []byte(d)
			}
		}
	}
	if flags&FlagHasHooks != 0 {
		if s := r.str(); r.err == nil {
			m.Hooks = new(kernel.HookRecord)
			if err := json.Unmarshal([]byte(s), m.Hooks); err != nil {
				return fmt.Errorf("the message's hook record: %w", err)
			}
		}
	}
	if flags&FlagHasChild != 0 {
		if c := r.str(); r.err == nil {
			m.Child = &kernel.ChildRun{}
			if err := json.Unmarshal([]byte(c), m.Child); err != nil {
				return fmt.Errorf("the message's child run: %w", err)
			}
		}
	}
	if r.err != nil {
		return r.err
	}
	if r.off != len(r.s) {
		return fmt.Errorf("%d unexpected bytes after the message", len(r.s)-r.off)
	}
	return nil
}
