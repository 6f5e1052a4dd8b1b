package main

import (
	"context"
	"fmt"
	"io"

	"github.com/agentkernel/agentkernel/kernel"
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

// writeContext prints the messages of the session's next request.
func writeContext(w io.Writer, s *kernel.Session, systemPrompt string, full bool) error {
	msgs, err := kernel.RequestMessages(systemPrompt, s.Messages)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "session %s · the next request holds %d of %d stored messages\n\n", s.Meta.ID, len(msgs), len(s.Messages))
	width := 100
	if full {
		width = 1 << 30
	}
	for i, m := range msgs {
		label := string(m.Role)
		if m.Seq != 0 {
			label = fmt.Sprintf("#%d %s", m.Seq, m.Role)
		}
		fmt.Fprintf(w, "%3d  %-16s %s\n", i+1, label, clip(m.Content, width))
		for _, c := range m.ToolCalls {
			fmt.Fprintf(w, "     → %s %s\n", c.Name, clip(c.Arguments, width))
		}
	}
	return nil
}
