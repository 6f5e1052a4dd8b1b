package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/tool"
)

// An approver sees what a call would do as its tool previews it
// (tool.Previewer): the same text in `kernel approve`, `kernel chat`, the
// run's "approval required" and `kernel mcp serve`'s elicitation.

// previewTimeout bounds one preview.
const previewTimeout = 5 * time.Second

// callPreview is a tool's preview of a pending call: a nil preview when
// the tool has none (or tools is nil), and the error when it failed.
func callPreview(ctx context.Context, tools *kernel.Registry, name string, args []byte) (*tool.Preview, error) {
	if tools == nil {
		return nil, nil
	}
	t, ok := tools.Lookup(name)
	if !ok {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, previewTimeout)
	defer cancel()
	return tool.PreviewOf(ctx, t, args)
}

// formatPreview renders a preview for a terminal, every line starting
// with prefix: the summary, then each file's note and diff, or the
// request; "" when there is nothing to show.
func formatPreview(pv *tool.Preview, err error, prefix string) string {
	var b strings.Builder
	switch {
	case err != nil:
		fmt.Fprintf(&b, "%sthe tool could not preview the call: %v\n", prefix, err)
	case pv == nil:
	case pv.Refused:
		fmt.Fprintf(&b, "%sthe tool would refuse this call: %s\n", prefix, pv.Summary)
	default:
		fmt.Fprintf(&b, "%swhat it would do: %s\n", prefix, pv.Summary)
		for _, f := range pv.Files {
			if f.Note != "" {
				fmt.Fprintf(&b, "%s  %s: %s\n", prefix, f.Path, f.Note)
			}
			for _, line := range strings.SplitAfter(strings.TrimSuffix(f.Diff, "\n"), "\n") {
				if line != "" {
					b.WriteString(prefix + "  " + strings.TrimSuffix(line, "\n") + "\n")
				}
			}
		}
		if q := pv.Request; q != nil {
			fmt.Fprintf(&b, "%s  %s %s\n", prefix, q.Method, q.URL)
			names := make([]string, 0, len(q.Header))
			for n := range q.Header {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				for _, v := range q.Header[n] {
					fmt.Fprintf(&b, "%s  %s: %s\n", prefix, n, v)
				}
			}
			if q.Body != "" {
				fmt.Fprintf(&b, "%s\n%s  %s\n", prefix, prefix, strings.ReplaceAll(q.Body, "\n", "\n"+prefix+"  "))
			}
			if q.BodyNote != "" {
				fmt.Fprintf(&b, "%s  (%s)\n", prefix, q.BodyNote)
			}
		}
	}
	return b.String()
}

// shownAsDiff is the argument a preview shows in full already, with what
// to print instead of it: a write_file's content, when the preview has
// its diff (the content once, as the diff).
func shownAsDiff(name string, args []byte, pv *tool.Preview) map[string]string {
	if name != "write_file" || pv == nil || pv.Refused || !slices.ContainsFunc(pv.Files, func(f tool.FileChange) bool { return f.Diff != "" }) {
		return nil
	}
	return map[string]string{"content": "shown as the diff below"}
}
