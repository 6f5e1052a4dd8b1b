package toolproto

import (
	"fmt"
	"strings"
)

// CorrectionPrefix starts every correction, so that the model (and a
// reader of the transcript) can tell it from the user's words.
const CorrectionPrefix = "Tool protocol error: "

// Correction is the message that answers a violation: what was wrong and
// how to write it instead. offered are the tools the model may call this
// turn; cfg gives the limits the Decoder applied.
func (c *Codec) Correction(v *Violation, offered []string, cfg DecoderConfig) string {
	var b strings.Builder
	b.WriteString(CorrectionPrefix)
	nth := ""
	if v.Call > 0 {
		nth = fmt.Sprintf(" (call %d)", v.Call)
	}
	example := c.f.callExample()
	switch v.Kind {
	case MalformedCall:
		fmt.Fprintf(&b, "your tool call%s could not be read: %s.\nWrite each call as\n%s\nwith valid JSON, then stop. Please write your answer again.", nth, v.Detail, example)
	case UnknownTool:
		fmt.Fprintf(&b, "there is no tool named %s that you can call now.", quote(v.Name))
		if len(offered) == 0 {
			b.WriteString(" No tool can be called now: answer in plain text.")
		} else {
			fmt.Fprintf(&b, " The tools you can call are: %s. Please write your answer again.", strings.Join(offered, ", "))
		}
	case FabricatedResult:
		b.WriteString("you wrote a tool result yourself. Results come only from the tools, in the next message, after your answer ends with its calls.\nWrite your calls again and stop after the last one; never write a result and never guess one.")
	case ProseAfterCall:
		b.WriteString("you wrote text after your tool call, before its result came back, as if the call had already run.\nPut any explanation before your first call, end your answer with the calls, and wait for their results. Please write your answer again.")
	case TooManyCalls:
		fmt.Fprintf(&b, "you made more than %d tool calls in one answer. Make at most %d, then stop and wait for their results.", limit(cfg.MaxCalls, DefaultMaxCalls), limit(cfg.MaxCalls, DefaultMaxCalls))
	case CallTooLarge:
		fmt.Fprintf(&b, "a tool call%s was longer than %d bytes. Keep each call shorter (split large content over several calls).", nth, limit(cfg.MaxCallBytes, DefaultMaxCallBytes))
	default:
		fmt.Fprintf(&b, "%s. Please write your answer again.", v.Error())
	}
	return b.String()
}

func limit(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}
