package kernel

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// RoleCompaction is the role of a compaction record in a stored session. A
// record is never sent to a model: it says how the requests after it are
// built (see Compaction). Stores keep it like any message (its Content is
// the record's JSON), so a session resumed after a crash rebuilds exactly
// the request the kernel would have sent.
const RoleCompaction Role = "compaction"

// Compaction is a compaction record: from its place in the session on,
// requests are built from the system prompt, Summary (in place of every
// message with Seq <= Through), the latest user request verbatim when the
// summary covers it (KeepUser), and the messages after Through, with the
// tool results up to TrimThrough longer than 2*TrimBytes cut to their head
// and tail. The original messages stay in the store.
type Compaction struct {
	Through     uint64 `json:"through,omitempty"`
	Summary     string `json:"summary,omitempty"`
	KeepUser    uint64 `json:"keep_user,omitempty"`
	TrimThrough uint64 `json:"trim_through,omitempty"`
	TrimBytes   int    `json:"trim_bytes,omitempty"`
	// Summarised counts the messages the summary replaced in this step.
	Summarised int `json:"summarised,omitempty"`
	// Trimmed counts the tool results cut in this step.
	Trimmed int `json:"trimmed,omitempty"`
	// TokensBefore and TokensAfter are the request's tokens around the step.
	TokensBefore int           `json:"tokens_before"`
	TokensAfter  int           `json:"tokens_after"`
	Model        string        `json:"model,omitempty"`
	Usage        Usage         `json:"usage,omitzero"`
	CostUSD      float64       `json:"cost_usd,omitempty"`
	Duration     time.Duration `json:"duration,omitempty"`
	Forced       bool          `json:"forced,omitempty"`
	// Instructions are what before_compact hooks added to the
	// summariser's instruction.
	Instructions string `json:"instructions,omitempty"`
}

// ParseCompaction decodes the record a RoleCompaction message carries.
func ParseCompaction(m *Message) (*Compaction, error) {
	if m.Role != RoleCompaction {
		return nil, fmt.Errorf("message %d is a %s message, not a compaction record", m.Seq, m.Role)
	}
	var c Compaction
	if err := json.Unmarshal([]byte(m.Content), &c); err != nil {
		return nil, fmt.Errorf("compaction record %d: %w", m.Seq, err)
	}
	return &c, nil
}

// summarySeparator joins the summary to the system prompt.
const summarySeparator = "\n\n"

// SummaryPrefix starts the summary in the system message of a request.
const SummaryPrefix = "Summary of the earlier conversation (the kernel compacted it to fit the context window):\n\n"

// RequestMessages returns the messages of the next request as the kernel
// builds them from a stored history: systemPrompt (when set), then stored
// as the latest compaction record in it says (all of it when there is
// none), without failed turns. It is what `kernel sessions show --context`
// prints. A request that
// still exceeds the hard limit also leaves out its oldest exchanges; that
// step is not recorded.
func RequestMessages(systemPrompt string, stored []Message) ([]Message, error) {
	var sys []Message
	if systemPrompt != "" {
		sys = []Message{{Role: RoleSystem, Content: systemPrompt}}
	}
	var rec *Compaction
	for i := len(stored) - 1; i >= 0; i-- {
		if stored[i].Role == RoleCompaction {
			c, err := ParseCompaction(&stored[i])
			if err != nil {
				return nil, err
			}
			rec = c
			break
		}
	}
	return buildView(sys, stored, rec), nil
}

// buildView applies rec to msgs (stored messages, no system message).
//
// Failed turns, and the prompts they left unanswered, are left out first
// (withoutFailed), before the summary joins the system message.
func buildView(sys, msgs []Message, rec *Compaction) []Message {
	msgs = withoutFailed(msgs)
	if rec == nil {
		return append(sys[:len(sys):len(sys)], msgs...)
	}
	out := make([]Message, 0, len(sys)+2+len(msgs))
	out = append(out, sys...)
	if rec.Summary != "" {
		// The summary joins the system message: a separate user message
		// before the kept request would read as a prompt left unanswered.
		if len(out) > 0 {
			out[len(out)-1].Content += summarySeparator + SummaryPrefix + rec.Summary
		} else {
			out = append(out, Message{Role: RoleSystem, Content: SummaryPrefix + rec.Summary})
		}
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Role == RoleCompaction {
			continue
		}
		if m.Seq <= rec.Through {
			if rec.KeepUser != 0 && m.Seq == rec.KeepUser {
				out = append(out, *m)
			}
			continue
		}
		if m.Role == RoleTool && m.Seq <= rec.TrimThrough {
			if t, ok := trimText(m.Content, rec.TrimBytes); ok {
				c := *m
				c.Content = t
				out = append(out, c)
				continue
			}
		}
		out = append(out, *m)
	}
	return out
}

// trimText keeps the first and last keep bytes of s (cut at character
// boundaries) with a marker between them, when s is longer than that.
func trimText(s string, keep int) (string, bool) {
	if keep <= 0 || len(s) <= 2*keep+200 {
		return s, false
	}
	h := keep
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	t := len(s) - keep
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	left := t - h
	return s[:h] + "\n[… " + strconv.Itoa(left) + " of " + strconv.Itoa(len(s)) +
		" bytes trimmed by the kernel to fit the context window; ask for a narrower range if you need them …]\n" + s[t:], true
}
