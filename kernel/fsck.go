package kernel

import "fmt"

// FsckReport is what a StoreChecker found.
type FsckReport struct {
	Sessions []FsckSession
	// Quarantined lists copies of damaged files the store kept aside.
	Quarantined []string
}

// Damaged counts the sessions with damage.
func (r *FsckReport) Damaged() int {
	n := 0
	for i := range r.Sessions {
		if !r.Sessions[i].OK() {
			n++
		}
	}
	return n
}

// FsckSession is what a StoreChecker found in one session.
type FsckSession struct {
	ID       string
	Messages int // message values read
	// Damaged maps the sequence number of each message that cannot be
	// read to the reason (a checksum mismatch, a value that does not
	// decode, a missing message).
	Damaged map[uint64]string
	// Meta and Pending are the errors reading those parts, if any.
	Meta    error
	Pending error
	// Repaired is set when the checker stored placeholders for the
	// damaged messages (repair mode).
	Repaired bool
	// Problems are what is wrong with a session whose values all read:
	// a history the kernel would not have written (CheckHistory), rows
	// a store keeps that disagree with each other.
	Problems []FsckProblem
}

// FsckProblem is one inconsistency a StoreChecker found in a session.
type FsckProblem struct {
	Seq  uint64 // the message it is about, or 0 for the session
	Text string
	// Repaired is set when the checker fixed it (repair mode).
	Repaired bool
}

// OK reports whether nothing in the session is damaged.
func (f *FsckSession) OK() bool {
	return len(f.Damaged) == 0 && f.Meta == nil && f.Pending == nil && len(f.Problems) == 0
}

// Unrepaired reports whether something found in the session is still
// wrong: damage no repair stored placeholders for, metadata or a pending
// approval that does not read, a problem the checker could not fix.
func (f *FsckSession) Unrepaired() bool {
	if f.Meta != nil || f.Pending != nil || len(f.Damaged) > 0 && !f.Repaired {
		return true
	}
	for _, p := range f.Problems {
		if !p.Repaired {
			return true
		}
	}
	return false
}

// CheckHistory returns what in a session's messages (all readable, in
// seq order) breaks the pairing of tool calls and results that every
// history the kernel writes keeps: each tool result answers a call of the
// assistant message before it, once; every call of an assistant message
// has its result before the next assistant message (the last assistant
// message's calls may still be open: loading the session answers them as
// interrupted); a pending approval is for one of those open calls. A
// model API rejects a history that breaks it. Stores' fsck use it.
func CheckHistory(msgs []Message, pending *Approval) []FsckProblem {
	var out []FsckProblem
	var open, answered map[string]bool
	var turn *Message // the last assistant message
	unanswered := func() {
		if turn == nil {
			return
		}
		for _, c := range turn.ToolCalls {
			if open[c.ID] {
				out = append(out, FsckProblem{Seq: turn.Seq, Text: fmt.Sprintf("call %s (%s) has no result, and a later assistant message follows it", c.ID, c.Name)})
			}
		}
	}
	for i := range msgs {
		m := &msgs[i]
		switch m.Role {
		case RoleAssistant:
			unanswered()
			turn, open, answered = m, map[string]bool{}, map[string]bool{}
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case RoleTool:
			switch {
			case open[m.ToolCallID]:
				delete(open, m.ToolCallID)
				answered[m.ToolCallID] = true
			case answered[m.ToolCallID]:
				out = append(out, FsckProblem{Seq: m.Seq, Text: fmt.Sprintf("a second result for call %s", m.ToolCallID)})
			default:
				out = append(out, FsckProblem{Seq: m.Seq, Text: fmt.Sprintf("a result for call %q, which the assistant message before it did not make", m.ToolCallID)})
			}
		}
	}
	if pending != nil && !open[pending.Call.ID] {
		out = append(out, FsckProblem{Text: fmt.Sprintf("the pending approval is for call %q, which is not an open call of the last assistant message", pending.Call.ID)})
	}
	return out
}
