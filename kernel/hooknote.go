package kernel

// What a hook at a lifecycle point did, as HookNote.What says it.
const (
	NoteBlocked      = "blocked"      // refused the run, blocked the request or the answer, vetoed a compaction
	NoteFailed       = "failed"       // failed and stepped aside (fail_open)
	NoteContext      = "context"      // added context (a system message)
	NoteEdited       = "edited"       // replaced the content of a message of the request
	NotePrompt       = "prompt"       // rewrote the prompt
	NoteText         = "text"         // replaced the answer's text
	NoteReasoning    = "reasoning"    // replaced the answer's reasoning
	NoteRefused      = "refused"      // refused one of the answer's calls
	NoteContinued    = "continued"    // continued a completed run
	NoteInstructions = "instructions" // added instructions for the summariser
)

// HookNote records on a stored message what a hook at a lifecycle point
// did there. The prompt carries run_start's notes, the answer (or the
// marker of a turn a hook blocked) those of the turn's before_compact,
// before_model and after_model, and the message a run_end hook continued
// a run with its note: WalkState rebuilds State.Hooks from them.
type HookNote struct {
	Hook  string    `json:"hook"`
	Point HookPoint `json:"phase"`
	What  string    `json:"what"`
	// Reason is a block's or a refusal's reason, or a failure's error.
	Reason string `json:"reason,omitempty"`
}

// HookRecord is what lifecycle hooks did to a stored message
// (Message.Hooks). Edits are those made to the request an answer
// answers: every request built after it applies them too, so what the
// model saw is what is sent again.
type HookRecord struct {
	Notes []HookNote `json:"notes,omitempty"`
	Edits []Edit     `json:"edits,omitempty"`
}

// continued reports whether m is a message a run_end hook continued the
// run with.
func (m *Message) continued() bool {
	if m.Hooks == nil || m.Role != RoleUser {
		return false
	}
	for _, n := range m.Hooks.Notes {
		if n.Point == PointRunEnd && n.What == NoteContinued {
			return true
		}
	}
	return false
}

// applyNotes adds m's notes to the verdicts.
func (v *HookVerdicts) applyNotes(m *Message) {
	if m.Hooks == nil {
		return
	}
	for _, n := range m.Hooks.Notes {
		if pv := v.of(n.Point); pv != nil {
			pv.note(n.Hook, n.What)
		}
	}
}

// hasEdits reports whether m carries edits of a request.
func (m *Message) hasEdits() bool { return m.Hooks != nil && len(m.Hooks.Edits) > 0 }

// applyEdits returns msgs with the content of every message an edit in
// msgs names replaced, the latest edit of a message winning; msgs itself
// (not a copy) when no message carries an edit.
func applyEdits(msgs []Message) []Message {
	var edits map[uint64]string
	for i := range msgs {
		if msgs[i].hasEdits() {
			if edits == nil {
				edits = map[uint64]string{}
			}
			for _, e := range msgs[i].Hooks.Edits {
				edits[e.Seq] = e.Content
			}
		}
	}
	if edits == nil {
		return msgs
	}
	out := make([]Message, len(msgs))
	copy(out, msgs)
	for i := range out {
		if c, ok := edits[out[i].Seq]; ok && out[i].Seq != 0 {
			out[i].Content = c
		}
	}
	return out
}
