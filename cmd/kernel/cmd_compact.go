package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/memory"
)

// compactSession is `kernel sessions compact ID`.
func compactSession(ctx context.Context, cf *commonFlags, env *cliEnv, id string) error {
	r := newRenderer(env, false, nil)
	a, k, err := startKernel(ctx, cf, env, r)
	if err != nil {
		return err
	}
	defer a.Close()
	rec, err := k.Compact(ctx, id)
	if err != nil {
		return err
	}
	if rec == nil {
		fmt.Fprintln(env.stderr, "nothing to compact: the session is only its latest exchange")
		return nil
	}
	fmt.Fprintf(env.stdout, "compacted %s: %d messages summarised through #%d, %d tool results trimmed · %d → %d tokens · %d in / %d out tokens, $%.4f\n",
		id, rec.Summarised, rec.Through, rec.Trimmed, rec.TokensBefore, rec.TokensAfter, rec.Usage.InputTokens, rec.Usage.OutputTokens, rec.CostUSD)
	return nil
}

// writeCompaction marks a compaction record in a transcript.
func writeCompaction(w io.Writer, msg *kernel.Message, full bool) {
	c, err := kernel.ParseCompaction(msg)
	if err != nil {
		fmt.Fprintf(w, "[%d] ── compaction record unreadable: %v\n\n", msg.Seq, err)
		return
	}
	fmt.Fprintf(w, "[%d] ── compacted: the model sees from here ", msg.Seq)
	if c.Through > 0 {
		fmt.Fprintf(w, "a summary of #1–#%d", c.Through)
		if c.KeepUser != 0 {
			fmt.Fprintf(w, " (with request #%d verbatim)", c.KeepUser)
		}
	} else {
		fmt.Fprint(w, "every message")
	}
	if c.TrimThrough > 0 {
		fmt.Fprintf(w, ", tool results up to #%d trimmed to %s head+tail", c.TrimThrough, fmtBytes(c.TrimBytes))
	}
	fmt.Fprintf(w, " · %d → %d tokens", c.TokensBefore, c.TokensAfter)
	if c.Model != "" {
		fmt.Fprintf(w, " · %s, %d in / %d out tokens, $%.4f", c.Model, c.Usage.InputTokens, c.Usage.OutputTokens, c.CostUSD)
	}
	fmt.Fprintln(w, " ──")
	if c.Summary != "" {
		if full {
			fmt.Fprintln(w, indent(c.Summary))
		} else {
			fmt.Fprintln(w, "    "+clip(c.Summary, 100))
		}
	}
	fmt.Fprintln(w)
}

// writeContext prints the messages of the session's next request, then
// the context breakdown: the tokens (counted by tok) of the system
// prompt, the summary, the conversation, the context lifecycle hooks add
// and, on a line of its own, what memory injected.
func writeContext(w io.Writer, s *kernel.Session, systemPrompt string, full bool, tok kernel.Tokenizer) error {
	msgs, err := kernel.RequestMessages(systemPrompt, s.Messages)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "session %s · the next request holds %d of %d stored messages\n\n", s.Meta.ID, len(msgs), len(s.Messages))
	width := 100
	if full {
		width = 1 << 30
	}
	var b contextBreakdown
	for i, m := range msgs {
		label := string(m.Role)
		hook := contextHook(&m)
		switch {
		case hook == memory.HookName:
			label = "memory"
		case hook != "":
			label = "hook " + hook
		}
		if m.Seq != 0 {
			label = fmt.Sprintf("#%d %s", m.Seq, label)
		}
		content, summary, _ := strings.Cut(m.Content, kernel.SummaryPrefix)
		fmt.Fprintf(w, "%3d  %-16s %s\n", i+1, label, clip(content, width))
		if summary != "" {
			fmt.Fprintf(w, "     + summary    %s\n", clip(summary, width))
		}
		for _, c := range m.ToolCalls {
			fmt.Fprintf(w, "     → %s %s\n", c.Name, clip(c.Arguments, width))
		}
		n := tok.Count(content)
		for _, c := range m.ToolCalls {
			n += tok.Count(c.Name) + tok.Count(c.Arguments)
		}
		switch {
		case i == 0 && m.Role == kernel.RoleSystem && m.Seq == 0 && hook == "":
			b.system += n
		case hook == memory.HookName:
			b.memory += n
		case hook != "":
			b.hooks += n
		default:
			b.messages += n
		}
		if summary != "" {
			b.summary += tok.Count(summary)
		}
	}
	fmt.Fprintf(w, "\ncontext breakdown (tokens of the text, without the chat format's framing):\n")
	for _, l := range []struct {
		name string
		n    int
	}{{"system prompt", b.system}, {"summary", b.summary}, {"messages", b.messages}, {"hook context", b.hooks}, {"memory", b.memory}} {
		fmt.Fprintf(w, "  %-14s %7d\n", l.name, l.n)
	}
	fmt.Fprintf(w, "  %-14s %7d\n", "total", b.system+b.summary+b.messages+b.hooks+b.memory)
	return nil
}

// contextBreakdown is the tokens of a request by where they come from.
type contextBreakdown struct {
	system, summary, messages, hooks, memory int
}

// contextHook is the hook whose context m carries (a system message a
// lifecycle hook added), or "".
func contextHook(m *kernel.Message) string {
	if m.Role != kernel.RoleSystem || m.Hooks == nil {
		return ""
	}
	for _, n := range m.Hooks.Notes {
		if n.What == kernel.NoteContext {
			return n.Hook
		}
	}
	return ""
}
