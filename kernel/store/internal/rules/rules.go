// Package rules holds what every session store keeps the same, so that a
// session moves between them unchanged (kernel store copy, export and
// import): the rule for session ids, and the placeholder a store shows
// for a message that cannot be read. Only the stores under kernel/store
// and the export format (kernel/store/export) import it.
package rules

import (
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/kernel"
)

// MaxIDLength is the longest session id a store accepts, in bytes.
const MaxIDLength = 128

// CheckID applies the stores' rule for session ids: 1 to 128 bytes of
// [A-Za-z0-9._-]. A store keys its rows or files by the id, so nothing
// else reaches it.
func CheckID(id string) error {
	if id == "" {
		return errors.New("empty session id")
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("session id %.20q… is longer than %d bytes", id, MaxIDLength)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("session id %q: byte %q at %d is not one of [A-Za-z0-9._-]", id, c, i)
		}
	}
	return nil
}

// Placeholder returns the message that stands in for message seq of a
// session, msgs being the messages before it, when it cannot be read
// because of cause, and says what was lost. Its role keeps the
// conversation valid for a provider: a lost tool result is an error
// result for the call still unanswered; a lost message followed by tool
// results (an assistant's tool calls) is filled in by FixPlaceholders
// once they are read; any other is a user note.
func Placeholder(msgs []kernel.Message, seq uint64, cause error) kernel.Message {
	text := fmt.Sprintf("[message %d of this session could not be read and was lost (%v). Run `kernel sessions fsck` for details.]", seq, cause)
	m := kernel.Message{Seq: seq, Role: kernel.RoleUser, Content: text, IsError: true}
	if id, name, ok := unansweredCall(msgs); ok {
		m.Role, m.ToolCallID, m.ToolName = kernel.RoleTool, id, name
		m.Content = fmt.Sprintf("[the result of this call was lost: message %d could not be read (%v). The call may or may not have run.]", seq, cause)
	}
	return m
}

// unansweredCall returns the first tool call of the last assistant
// message of msgs that no later tool result answers.
func unansweredCall(msgs []kernel.Message) (id, name string, ok bool) {
	answered := map[string]bool{}
	for i := len(msgs) - 1; i >= 0; i-- {
		switch msgs[i].Role {
		case kernel.RoleTool:
			answered[msgs[i].ToolCallID] = true
		case kernel.RoleAssistant:
			for _, c := range msgs[i].ToolCalls {
				if !answered[c.ID] {
					return c.ID, c.Name, true
				}
			}
			return "", "", false
		default:
			return "", "", false
		}
	}
	return "", "", false
}

// Placeholders replaces each message of msgs (a session's, in seq order,
// one for every seq from 1) that damaged names by its Placeholder, and
// returns the replaced seqs in order: what `kernel sessions fsck
// --repair` stores, in every store.
func Placeholders(msgs []kernel.Message, damaged map[uint64]string) []uint64 {
	lost := map[uint64]bool{}
	var seqs []uint64
	for i := range msgs {
		if reason, bad := damaged[msgs[i].Seq]; bad {
			lost[msgs[i].Seq] = true
			seqs = append(seqs, msgs[i].Seq)
			msgs[i] = Placeholder(msgs[:i], msgs[i].Seq, errors.New(reason))
		}
	}
	FixPlaceholders(msgs, lost)
	return seqs
}

// FixPlaceholders turns a user-note placeholder (one of the seqs in lost)
// that tool results follow into the assistant message that made those
// calls (its content says what was lost), so the results still answer a
// call.
func FixPlaceholders(msgs []kernel.Message, lost map[uint64]bool) {
	for i := range msgs {
		if !lost[msgs[i].Seq] || msgs[i].Role != kernel.RoleUser {
			continue
		}
		var calls []kernel.ToolCall
		for j := i + 1; j < len(msgs) && msgs[j].Role == kernel.RoleTool; j++ {
			calls = append(calls, kernel.ToolCall{ID: msgs[j].ToolCallID, Name: msgs[j].ToolName, Arguments: "{}"})
		}
		if len(calls) > 0 {
			msgs[i].Role, msgs[i].ToolCalls, msgs[i].IsError = kernel.RoleAssistant, calls, false
		}
	}
}
