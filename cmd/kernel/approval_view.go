package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/agentkernel/agentkernel/kernel"
)

// foldWidth is where long argument values are folded (never cut).
const foldWidth = 96

// foldMark ends a display line that continues on the next one.
const foldMark = " ↩"

// formatArgs renders a call's arguments completely, one argument per
// entry in their order: a string value as its text, line by line, with
// lines longer than foldWidth folded; any other value as indented JSON.
// Nothing is cut, so an approver sees the whole call, except the
// arguments in skip, shown elsewhere: their size and skip's words stand
// in for them. prefix starts every line.
func formatArgs(raw json.RawMessage, prefix string, skip map[string]string) string {
	var b strings.Builder
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return prefix + foldLine(string(raw), prefix) + "\n"
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			break
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		key, _ := kt.(string)
		var s string
		if json.Unmarshal(v, &s) == nil {
			if instead, ok := skip[key]; ok {
				fmt.Fprintf(&b, "%s%s: (%d bytes: %s)\n", prefix, key, len(s), instead)
				continue
			}
			if !strings.Contains(s, "\n") && len(s) <= foldWidth-len(key) {
				fmt.Fprintf(&b, "%s%s: %s\n", prefix, key, s)
				continue
			}
			fmt.Fprintf(&b, "%s%s: (%d bytes, %d lines)\n", prefix, key, len(s), strings.Count(strings.TrimSuffix(s, "\n"), "\n")+1)
			for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
				fmt.Fprintf(&b, "%s  │ %s\n", prefix, foldLine(line, prefix+"  │ "))
			}
			continue
		}
		var ind bytes.Buffer
		if json.Indent(&ind, v, prefix+"  ", "  ") != nil {
			ind.Reset()
			ind.Write(v)
		}
		fmt.Fprintf(&b, "%s%s: %s\n", prefix, key, foldLine(ind.String(), prefix+"  "))
	}
	return b.String()
}

// foldLine breaks s into pieces of at most foldWidth bytes (on rune
// boundaries), joined by foldMark, a newline and cont.
func foldLine(s, cont string) string {
	if len(s) <= foldWidth {
		return s
	}
	var b strings.Builder
	for len(s) > foldWidth {
		i := foldWidth
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		b.WriteString(s[:i] + foldMark + "\n" + cont)
		s = s[i:]
	}
	b.WriteString(s)
	return b.String()
}

// describeApproval is the full picture an approver needs: the tool, every
// argument, the rule and its message, where the call will run, and what
// it would do as its tool previews it (tools nil: no preview).
func describeApproval(ctx context.Context, a *kernel.Approval, meta *kernel.SessionMeta, tools *kernel.Registry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tool: %s\n", a.Call.Name)
	if a.RuleID != "" || a.Message != "" {
		fmt.Fprintf(&b, "asked by rule %s: %s\n", orDash(a.RuleID), a.Message)
	}
	if meta != nil && meta.Context != nil && meta.Context.Workspace != "" {
		fmt.Fprintf(&b, "workspace: %s\n", meta.Context.Workspace)
	}
	pv, err := callPreview(ctx, tools, a.Call.Name, a.Args)
	b.WriteString("arguments:\n")
	b.WriteString(formatArgs(a.Args, "  ", shownAsDiff(a.Call.Name, a.Args, pv)))
	b.WriteString(formatPreview(pv, err, ""))
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// confirm asks a yes/no question on stderr and reads the answer from in.
func confirm(in io.Reader, out io.Writer, question string) bool {
	fmt.Fprintf(out, "%s [y/N] ", question)
	line, _ := bufio.NewReader(in).ReadString('\n')
	fmt.Fprintln(out)
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}
