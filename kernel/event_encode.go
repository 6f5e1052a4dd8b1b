package kernel

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// The event set is closed, so each event type has its own encoder here:
// appendEvent writes {"type":"…", then the fields in the order and form
// encoding/json gives them (escaping, omitempty, the duration fields the
// MarshalJSON methods of event_json.go move to the end), with no
// reflection and no second copy to put "type" first. Nested types that are
// not on a run's common path (Approval, Block, notes, a message's records)
// are encoded by encoding/json, as before.
// Why: RATIONALE.md, "A run through kernel serve, sixth round (issue 45)".
// TestEventEncodersMatchEncodingJSON holds every type, byte for byte, to
// encoding/json's output.

// AppendEvent appends e's JSON (what MarshalEvent returns) to b.
func AppendEvent(b []byte, e Event) ([]byte, error) {
	out, err := appendEvent(b, e)
	if err != nil {
		if _, ok := err.(noEncoderError); ok || e == nil {
			return b, err
		}
		// A float JSON cannot carry (NaN, ±Inf) or a nested value
		// encoding/json refused: its own error, word for word.
		return b, marshalEventReflect(e)
	}
	return out, err
}

// noEncoderError is an event type without an encoder in appendEvent.
type noEncoderError struct{ e Event }

func (n noEncoderError) Error() string {
	return fmt.Sprintf("event %s (%T): no encoder", n.e.Type(), n.e)
}

// errUnsupportedFloat stops an encoder at a float JSON cannot carry.
var errUnsupportedFloat = fmt.Errorf("unsupported float")

// marshalEventReflect returns the error encoding/json gives for e.
func marshalEventReflect(e Event) error {
	_, err := json.Marshal(e)
	if err == nil {
		err = fmt.Errorf("event %s: unsupported value", e.Type())
	}
	return err
}

func appendEvent(b []byte, e Event) ([]byte, error) {
	if e == nil {
		return b, fmt.Errorf("nil event")
	}
	b = append(b, `{"type":"`...)
	b = append(b, e.Type()...)
	b = append(b, '"')
	var err error
	switch e := e.(type) {
	case RunStarted:
		b = appendStr(b, `,"session_id":`, e.SessionID)
		b = appendStr(b, `,"model":`, e.Model)
		if e.Prompt != "" {
			b = appendStr(b, `,"prompt":`, e.Prompt)
		}
		b = appendInt(b, `,"max_turns":`, int64(e.MaxTurns))
		if e.NewSession {
			b = append(b, `,"new_session":true`...)
		}
		if e.Resumed {
			b = append(b, `,"resumed":true`...)
		}
	case TurnStarted:
		b = appendInt(b, `,"turn":`, int64(e.Turn))
		b = appendInt(b, `,"max_turns":`, int64(e.MaxTurns))
	case ModelRequest:
		b = appendInt(b, `,"turn":`, int64(e.Turn))
		b = appendInt(b, `,"max_turns":`, int64(e.MaxTurns))
		b = appendInt(b, `,"messages":`, int64(e.Messages))
		b = append(b, `,"tools":`...)
		if e.Tools == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for i, t := range e.Tools {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, t)
			}
			b = append(b, ']')
		}
		b = appendStr(b, `,"progress":`, e.Progress)
	case MessageDelta:
		b = appendStr(b, `,"text":`, e.Text)
	case ReasoningDelta:
		b = appendStr(b, `,"text":`, e.Text)
	case MessageCompleted:
		b = appendInt(b, `,"turn":`, int64(e.Turn))
		if b, err = appendMessage(b, `,"message":`, &e.Message); err != nil {
			return b, err
		}
		b = appendUsage(b, `,"usage":`, e.Usage)
		if b, err = appendFloat(b, `,"cost_usd":`, e.CostUSD); err != nil {
			return b, err
		}
		b = appendDuration(b, `,"duration":`, e.Duration)
	case ToolStarted:
		b = appendInt(b, `,"turn":`, int64(e.Turn))
		b = appendStr(b, `,"call_id":`, e.CallID)
		b = appendStr(b, `,"tool":`, e.Tool)
		b = appendStr(b, `,"args":`, e.Args)
		b = appendStr(b, `,"progress":`, e.Progress)
	case ToolProgress:
		b = appendStr(b, `,"call_id":`, e.CallID)
		b = appendStr(b, `,"tool":`, e.Tool)
		b = appendStr(b, `,"text":`, e.Text)
	case ToolCompleted:
		b = appendStr(b, `,"call_id":`, e.CallID)
		b = appendStr(b, `,"tool":`, e.Tool)
		b = appendStr(b, `,"outcome":`, string(e.Outcome))
		if e.IsError {
			b = append(b, `,"is_error":true`...)
		}
		if e.Error != "" {
			b = appendStr(b, `,"error":`, e.Error)
		}
		b = appendInt(b, `,"bytes":`, int64(e.Bytes))
		b = appendDuration(b, `,"duration":`, e.Duration)
	case PolicyDecided:
		b = appendStr(b, `,"call_id":`, e.CallID)
		b = appendStr(b, `,"tool":`, e.Tool)
		if b, err = appendDecision(b, `,"decision":`, &e.Decision); err != nil {
			return b, err
		}
	case ApprovalRequired:
		if b, err = appendValue(b, `,"approval":`, e.Approval); err != nil {
			return b, err
		}
	case ApprovalResolved:
		b = appendStr(b, `,"approval_id":`, e.ApprovalID)
		b = appendStr(b, `,"call_id":`, e.CallID)
		b = appendStr(b, `,"tool":`, e.Tool)
		b = appendBool(b, `,"approved":`, e.Approved)
		if e.Expired {
			b = append(b, `,"expired":true`...)
		}
		if e.Note != "" {
			b = appendStr(b, `,"note":`, e.Note)
		}
		if e.By != "" {
			b = appendStr(b, `,"by":`, e.By)
		}
	case BudgetWarning:
		b = appendBudget(b, e.BudgetNotice)
	case BudgetExceeded:
		b = appendBudget(b, e.BudgetNotice)
	case ContextCompacted:
		b = appendInt(b, `,"dropped":`, int64(e.Dropped))
		b = appendInt(b, `,"kept":`, int64(e.Kept))
		b = appendInt(b, `,"estimated_tokens":`, int64(e.EstimatedTokens))
		if e.Kind != "" {
			b = appendStr(b, `,"kind":`, e.Kind)
		}
		if e.Trimmed != 0 {
			b = appendInt(b, `,"trimmed":`, int64(e.Trimmed))
		}
		if e.Through != 0 {
			b = append(b, `,"through":`...)
			b = strconv.AppendUint(b, e.Through, 10)
		}
		if e.TokensBefore != 0 {
			b = appendInt(b, `,"tokens_before":`, int64(e.TokensBefore))
		}
		if e.TokensAfter != 0 {
			b = appendInt(b, `,"tokens_after":`, int64(e.TokensAfter))
		}
		if e.Model != "" {
			b = appendStr(b, `,"model":`, e.Model)
		}
		if e.Usage != (Usage{}) {
			b = appendUsage(b, `,"usage":`, e.Usage)
		}
		if e.CostUSD != 0 {
			if b, err = appendFloat(b, `,"cost_usd":`, e.CostUSD); err != nil {
				return b, err
			}
		}
		if e.Duration != 0 {
			b = appendDuration(b, `,"duration":`, e.Duration)
		}
	case ContextWarning:
		b = appendInt(b, `,"used":`, int64(e.Used))
		b = appendInt(b, `,"window":`, int64(e.Window))
		if b, err = appendFloat(b, `,"fraction":`, e.Fraction); err != nil {
			return b, err
		}
	case SteerDelivered:
		b = appendStr(b, `,"session_id":`, e.SessionID)
		b = appendStr(b, `,"id":`, e.ID)
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, e.Seq, 10)
		b = appendStr(b, `,"text":`, e.Text)
	case ProviderRetry:
		// Delay comes last: the MarshalJSON method's shadowing field
		// (event_json.go) is encoded after the embedded struct's fields.
		b = appendInt(b, `,"attempt":`, int64(e.Attempt))
		b = appendStr(b, `,"error":`, e.Error)
		if e.Cause != "" {
			b = appendStr(b, `,"cause":`, e.Cause)
		}
		if e.StatusCode != 0 {
			b = appendInt(b, `,"status_code":`, int64(e.StatusCode))
		}
		if e.Model != "" {
			b = appendStr(b, `,"model":`, e.Model)
		}
		if e.Fallback != "" {
			b = appendStr(b, `,"fallback":`, e.Fallback)
		}
		if e.Superseded != 0 {
			b = appendInt(b, `,"superseded":`, int64(e.Superseded))
		}
		b = appendDuration(b, `,"delay":`, e.Delay)
	case RunCompleted:
		b = appendStr(b, `,"session_id":`, e.SessionID)
		b = appendStr(b, `,"stop_reason":`, string(e.StopReason))
		if e.Output != "" {
			b = appendStr(b, `,"output":`, e.Output)
		}
		b = appendUsage(b, `,"usage":`, e.Usage)
		if b, err = appendFloat(b, `,"cost_usd":`, e.CostUSD); err != nil {
			return b, err
		}
		b = appendInt(b, `,"turns":`, int64(e.Turns))
		if e.Blocked != nil {
			if b, err = appendValue(b, `,"blocked":`, e.Blocked); err != nil {
				return b, err
			}
		}
		if len(e.Notes) > 0 {
			if b, err = appendValue(b, `,"notes":`, e.Notes); err != nil {
				return b, err
			}
		}
		b = appendDuration(b, `,"duration":`, e.Duration) // last, as ProviderRetry's delay
	case RunFailed:
		b = appendStr(b, `,"session_id":`, e.SessionID)
		b = appendStr(b, `,"stop_reason":`, string(e.StopReason))
		b = appendStr(b, `,"error":`, e.Error)
	case HookBlocked:
		b = appendHookCall(b, e.Hook, e.Phase, e.CallID, e.Tool)
		b = appendStr(b, `,"reason":`, e.Reason)
	case HookRewrote:
		b = appendHookCall(b, e.Hook, e.Phase, e.CallID, e.Tool)
		b = appendStr(b, `,"what":`, e.What)
	case HookFailed:
		b = appendHookCall(b, e.Hook, e.Phase, e.CallID, e.Tool)
		b = appendStr(b, `,"error":`, e.Error)
		b = appendBool(b, `,"fail_open":`, e.FailOpen)
	case HookCompleted:
		b = appendStr(b, `,"hook":`, e.Hook)
		b = appendStr(b, `,"phase":`, e.Phase)
		b = appendInt(b, `,"turn":`, int64(e.Turn))
		b = appendStr(b, `,"outcome":`, e.Outcome)
		if e.Concurrent {
			b = append(b, `,"concurrent":true`...)
		}
		b = appendDuration(b, `,"duration":`, e.Duration) // last, as ProviderRetry's delay
	case ConfigReloaded:
		b = appendStr(b, `,"what":`, e.What)
		b = appendStr(b, `,"source":`, e.Source)
		if e.Revision != "" {
			b = appendStr(b, `,"revision":`, e.Revision)
		}
		if e.SHA256 != "" {
			b = appendStr(b, `,"sha256":`, e.SHA256)
		}
		if e.Error != "" {
			b = appendStr(b, `,"error":`, e.Error)
		}
	case Notice:
		b = appendStr(b, `,"source":`, e.Source)
		b = appendStr(b, `,"level":`, e.Level)
		b = appendStr(b, `,"text":`, e.Text)
	case AgentEvent:
		b = appendStr(b, `,"call_id":`, e.CallID)
		b = appendStr(b, `,"agent":`, e.Agent)
		b = appendStr(b, `,"session_id":`, e.SessionID)
		b = appendInt(b, `,"depth":`, int64(e.Depth))
		b = append(b, `,"event":`...)
		if e.Event == nil {
			b = append(b, "null"...)
		} else if b, err = appendEvent(b, e.Event); err != nil {
			return b, err
		}
	default:
		return b, noEncoderError{e}
	}
	return append(b, '}'), nil
}

// appendMessage writes m as encoding/json does.
func appendMessage(b []byte, key string, m *Message) ([]byte, error) {
	var err error
	b = append(b, key...)
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, m.Seq, 10)
	b = appendStr(b, `,"role":`, string(m.Role))
	if m.Content != "" {
		b = appendStr(b, `,"content":`, m.Content)
	}
	if m.Reasoning != "" {
		b = appendStr(b, `,"reasoning":`, m.Reasoning)
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i, c := range m.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendStr(b, `{"id":`, c.ID)
			b = appendStr(b, `,"name":`, c.Name)
			b = appendStr(b, `,"arguments":`, c.Arguments)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if m.ToolCallID != "" {
		b = appendStr(b, `,"tool_call_id":`, m.ToolCallID)
	}
	if m.ToolName != "" {
		b = appendStr(b, `,"tool_name":`, m.ToolName)
	}
	if m.IsError {
		b = append(b, `,"is_error":true`...)
	}
	if !m.Time.IsZero() {
		j, err := m.Time.MarshalJSON()
		if err != nil {
			return b, err
		}
		b = append(append(b, `,"time":`...), j...)
	}
	if m.Model != "" {
		b = appendStr(b, `,"model":`, m.Model)
	}
	if m.ReasoningField != "" {
		b = appendStr(b, `,"reasoning_field":`, m.ReasoningField)
	}
	if m.Failed != "" {
		b = appendStr(b, `,"failed":`, m.Failed)
	}
	if m.Protocol != nil {
		if b, err = appendValue(b, `,"protocol":`, m.Protocol); err != nil {
			return b, err
		}
	}
	if m.Approval != nil {
		if b, err = appendValue(b, `,"approval":`, m.Approval); err != nil {
			return b, err
		}
	}
	if m.Child != nil {
		if b, err = appendValue(b, `,"child":`, m.Child); err != nil {
			return b, err
		}
	}
	if len(m.ReasoningBlocks) > 0 {
		if b, err = appendValue(b, `,"reasoning_blocks":`, m.ReasoningBlocks); err != nil {
			return b, err
		}
	}
	if m.Hooks != nil {
		if b, err = appendValue(b, `,"hooks":`, m.Hooks); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// appendDecision writes d as Decision.MarshalJSON does: eval_time, the
// shadowing field, last.
func appendDecision(b []byte, key string, d *Decision) ([]byte, error) {
	var err error
	b = append(b, key...)
	b = appendStr(b, `{"id":`, d.ID)
	b = appendStr(b, `,"effect":`, string(d.Effect))
	if d.Message != "" {
		b = appendStr(b, `,"message":`, d.Message)
	}
	b = appendStrings(b, `,"rules":`, d.Rules)
	b = appendStrings(b, `,"would_deny":`, d.WouldDeny)
	b = appendStrings(b, `,"would_ask":`, d.WouldAsk)
	if d.Default {
		b = append(b, `,"default":true`...)
	}
	if d.Revision != "" {
		b = appendStr(b, `,"revision":`, d.Revision)
	}
	if d.SHA256 != "" {
		b = appendStr(b, `,"sha256":`, d.SHA256)
	}
	if len(d.Resolved) > 0 {
		if b, err = appendValue(b, `,"resolved":`, d.Resolved); err != nil {
			return b, err
		}
	}
	b = appendDuration(b, `,"eval_time":`, d.EvalTime)
	return append(b, '}'), nil
}

// appendStrings writes a non-empty list of strings (omitempty).
func appendStrings(b []byte, key string, list []string) []byte {
	if len(list) == 0 {
		return b
	}
	b = append(b, key...)
	for i, s := range list {
		if i == 0 {
			b = append(b, '[')
		} else {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

func appendBudget(b []byte, n BudgetNotice) []byte {
	b = appendStr(b, `,"id":`, n.ID)
	if n.Message != "" {
		b = appendStr(b, `,"message":`, n.Message)
	}
	if n.WrapUp {
		b = append(b, `,"wrap_up":true`...)
	}
	return b
}

func appendHookCall(b []byte, hook, phase, callID, tool string) []byte {
	b = appendStr(b, `,"hook":`, hook)
	b = appendStr(b, `,"phase":`, phase)
	if callID != "" {
		b = appendStr(b, `,"call_id":`, callID)
	}
	if tool != "" {
		b = appendStr(b, `,"tool":`, tool)
	}
	return b
}

func appendUsage(b []byte, key string, u Usage) []byte {
	b = append(b, key...)
	b = appendInt(b, `{"input_tokens":`, u.InputTokens)
	b = appendInt(b, `,"output_tokens":`, u.OutputTokens)
	if u.CachedInputTokens != 0 {
		b = appendInt(b, `,"cached_input_tokens":`, u.CachedInputTokens)
	}
	if u.CacheWriteTokens != 0 {
		b = appendInt(b, `,"cache_write_input_tokens":`, u.CacheWriteTokens)
	}
	if u.ReasoningTokens != 0 {
		b = appendInt(b, `,"reasoning_tokens":`, u.ReasoningTokens)
	}
	return append(b, '}')
}

func appendStr(b []byte, key, s string) []byte {
	return appendJSONString(append(b, key...), s)
}

func appendInt(b []byte, key string, n int64) []byte {
	return strconv.AppendInt(append(b, key...), n, 10)
}

func appendBool(b []byte, key string, v bool) []byte {
	return strconv.AppendBool(append(b, key...), v)
}

// appendDuration writes d as jsonDuration does: its String(), quoted.
func appendDuration(b []byte, key string, d time.Duration) []byte {
	return appendJSONString(append(b, key...), d.String())
}

// appendValue writes v as encoding/json does (for the nested types off the
// common path).
func appendValue(b []byte, key string, v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(append(b, key...), j...), nil
}

// appendFloat writes f as encoding/json writes a float64: shortest
// representation, exponent form below 1e-6 and from 1e21, "e-07" as
// "e-7".
func appendFloat(b []byte, key string, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, errUnsupportedFloat
	}
	b = append(b, key...)
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s quoted as encoding/json does with HTML
// escaping on (json.Marshal's default): <, > and & as \u003c, \u003e,
// \u0026; control bytes as \n, \r, \t, \b, \f or \u00XX; U+2028 and U+2029
// escaped; each byte of invalid UTF-8 as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
