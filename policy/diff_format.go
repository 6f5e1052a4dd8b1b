package policy

import (
	"fmt"
	"io"
	"strings"
)

// Format writes the report for a person: the summary, every changed
// decision and surface, and NEW's coverage.
func (r *DiffReport) Format(w io.Writer) error {
	var b strings.Builder
	ref := func(p PolicyRef) string {
		return fmt.Sprintf("%s (%s, revision %s, sha256 %s)", p.File, p.Name, p.Revision, short(p.SHA256))
	}
	fmt.Fprintf(&b, "policy diff\n  old: %s\n  new: %s\n", ref(r.Old), ref(r.New))
	fmt.Fprintf(&b, "%d sessions: %d calls re-decided, %d unchanged, %d changed", r.Sessions, r.Calls, r.Unchanged, r.Changed)
	if r.Gating > 0 {
		fmt.Fprintf(&b, " (%d between allow and deny/ask, %d unexpected)", r.Gating, r.Unexpected)
	}
	fmt.Fprintf(&b, "; %d surfaces, %d changed\n", r.Surfaces, len(r.SurfaceChanges))
	if r.SameEffectOtherRules > 0 {
		fmt.Fprintf(&b, "%d unchanged calls are now decided by other rules\n", r.SameEffectOtherRules)
	}
	if r.Unparsable > 0 {
		fmt.Fprintf(&b, "%d calls have arguments that are not a JSON object (never decided; not compared)\n", r.Unparsable)
	}
	if len(r.ByEffect) > 0 {
		b.WriteString("\nchanged, by effect:\n")
		for _, e := range r.ByEffect {
			fmt.Fprintf(&b, "  %-6s -> %-6s %d\n", e.From, e.To, e.Count)
		}
		b.WriteString("changed, by rule:\n")
		for _, c := range r.ByRule {
			fmt.Fprintf(&b, "  %s (%s) %d\n", c.Rule, c.Policy, c.Count)
		}
	}
	if len(r.Changes) > 0 {
		b.WriteString("\nchanges:\n")
	}
	for _, c := range r.Changes {
		mark := ""
		switch {
		case c.Gating && c.Expected:
			mark = "  (expected)"
		case c.Gating:
			mark = "  UNEXPECTED"
		}
		fmt.Fprintf(&b, "  session %s run %d turn %d call %s: %s %s%s\n", c.Session, c.Run, c.Turn, c.CallID, c.Tool, oneLine(string(c.Args), 120), mark)
		fmt.Fprintf(&b, "    old: %s\n    new: %s\n", c.Old.describe(), c.New.describe())
	}
	if len(r.SurfaceChanges) > 0 {
		b.WriteString("\nsurface changes:\n")
	}
	for _, s := range r.SurfaceChanges {
		fmt.Fprintf(&b, "  session %s run %d turn %d: %s -> %s", s.Session, s.Run, s.Turn, s.Old.describe(), s.New.describe())
		if len(s.Added) > 0 {
			fmt.Fprintf(&b, "; offers %s", strings.Join(s.Added, ", "))
		}
		if len(s.Removed) > 0 {
			fmt.Fprintf(&b, "; no longer offers %s", strings.Join(s.Removed, ", "))
		}
		b.WriteString("\n")
	}
	r.Coverage.New.format(&b, "new")
	_, err := io.WriteString(w, b.String())
	return err
}

func (s DecisionSide) describe() string {
	out := string(s.Effect)
	switch {
	case s.NotOffered:
		out += " (not offered)"
	case len(s.Rules) > 0:
		out += " by " + strings.Join(s.Rules, ", ")
	case s.Default:
		out += " (default)"
	}
	if s.Message != "" {
		out += ": " + oneLine(s.Message, 160)
	}
	return out
}

func (s SurfaceSide) describe() string {
	if s.SelectedBy != "" {
		return fmt.Sprintf("set %s (select %s)", s.Set, s.SelectedBy)
	}
	return "set " + s.Set
}

// Format writes the coverage for a person.
func (c *Coverage) Format(w io.Writer) error {
	var b strings.Builder
	c.format(&b, "")
	_, err := io.WriteString(w, strings.TrimPrefix(b.String(), "\n"))
	return err
}

func (c *Coverage) format(b *strings.Builder, which string) {
	title := "coverage"
	if which != "" {
		title += " of " + which
	}
	fmt.Fprintf(b, "\n%s %s over %d decided calls:\n", title, c.Policy.File, c.Calls)
	if len(c.DeadRules) == 0 {
		b.WriteString("  every rule matched a call\n")
	} else {
		fmt.Fprintf(b, "  %d rules matched no call:", len(c.DeadRules))
		for _, d := range c.DeadRules {
			fmt.Fprintf(b, " %s (line %d)", d.ID, d.Line)
		}
		b.WriteString("\n")
	}
	if len(c.DefaultOnly) > 0 {
		b.WriteString("  tools only the default decided:")
		for _, t := range c.DefaultOnly {
			fmt.Fprintf(b, " %s (%d calls)", t.Tool, t.Calls)
		}
		b.WriteString("\n")
	}
	if len(c.DeadSelects) > 0 {
		fmt.Fprintf(b, "  select rules that chose no surface: %s\n", strings.Join(c.DeadSelects, ", "))
	}
	if len(c.DeadDrops) > 0 {
		fmt.Fprintf(b, "  drop rules that dropped no tool: %s\n", strings.Join(c.DeadDrops, ", "))
	}
}
