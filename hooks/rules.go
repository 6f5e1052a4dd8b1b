package hooks

import (
	"fmt"
	"slices"

	"github.com/agentkernel/agentkernel/internal/config/names"
	"github.com/agentkernel/agentkernel/kernel"
)

// kindPoints says at which points each kind of rule works: every kind at
// every point where it means something (docs/hooks.md, "Hook kinds at each
// point"). nil means every point.
var kindPoints = map[string][]kernel.HookPoint{
	"command":     nil,
	"plugin":      nil,
	"block_when":  nil,
	"set_context": {kernel.PointRunStart, kernel.PointBeforeModel},
	"redact":      {kernel.PointAfterTool, kernel.PointRunStart, kernel.PointBeforeModel, kernel.PointAfterModel},
	"set_args":    {kernel.PointBeforeTool},
	"truncate":    {kernel.PointAfterTool},
}

// implied is the point of a kind of rule that does not say its phase.
var implied = map[string]kernel.HookPoint{"set_args": kernel.PointBeforeTool, "redact": kernel.PointAfterTool, "truncate": kernel.PointAfterTool}

// compileRule checks and compiles one rule: a tool hook (h) or a hook at
// a lifecycle point (ph); seen maps the names so far to their index.
func compileRule(i int, r Rule, opts Options, seen map[string]int) (h *hook, ph *PointHook, errs []error) {
	bad := func(field string, format string, args ...any) {
		f := fmt.Sprintf("rules[%d]", i)
		if field != "" {
			f += "." + field
		}
		errs = append(errs, hookError(r.Name, f, fmt.Errorf(format, args...)))
	}
	switch {
	case r.Name == "":
		bad("name", "is required")
	case !names.HookName.Valid(r.Name):
		bad("name", "must be %s", names.HookName.Desc())
	case r.Name == NameScrubber || r.Name == NameOutputLimit:
		bad("name", "%q is the name of a built-in hook", r.Name)
	default:
		if j, dup := seen[r.Name]; dup {
			bad("name", "duplicate: rules[%d] has the same name", j)
		}
		seen[r.Name] = i
	}

	var kinds []string
	for _, k := range []struct {
		name string
		set  bool
	}{
		{"command", r.Command != nil}, {"plugin", r.Plugin != nil}, {"block_when", r.BlockWhen != ""},
		{"set_context", r.SetContext != ""}, {"set_args", r.SetArgs != ""}, {"redact", r.Redact != nil}, {"truncate", r.Truncate != nil},
	} {
		if k.set {
			kinds = append(kinds, k.name)
		}
	}
	if len(kinds) != 1 {
		bad("", "a rule needs exactly one of command, plugin, block_when, set_context, set_args, redact, truncate; it has %d %v", len(kinds), kinds)
		return nil, nil, errs
	}
	kind := kinds[0]

	phase := r.Phase
	switch {
	case phase == "" && implied[kind] == "":
		bad("phase", "is required for a %s hook: one of %v", kind, kindAt(kind))
	case phase == "":
		phase = implied[kind]
	case !slices.Contains(kernel.HookPoints(), phase):
		bad("phase", "must be a hook point (%v), got %q", kernel.HookPoints(), phase)
	case !slices.Contains(kindAt(kind), phase):
		bad("phase", "a %s hook works at %v, not at %s", kind, kindAt(kind), phase)
	}
	if r.Concurrent && (phase != kernel.PointBeforeModel || kind != "command" && kind != "plugin" && kind != "block_when") {
		bad("concurrent", "only a before_model command, plugin or block_when hook runs concurrently with the model call")
	}

	var failOpen bool
	switch r.Fail {
	case "", FailClosed:
	case FailOpen:
		failOpen = true
	default:
		bad("fail", "must be fail_closed or fail_open, got %q", r.Fail)
	}
	var match *Matcher
	if r.Match != "" {
		m, err := NewMatcher(r.Match)
		if err != nil {
			bad("match", "%v", err)
		}
		match = m
	}
	if r.Message != "" && kind != "command" && kind != "plugin" && kind != "block_when" {
		bad("message", "is only used by command, plugin and block_when hooks")
	}
	if len(errs) > 0 {
		return nil, nil, errs
	}

	field := func(f string) string { return fmt.Sprintf("rules[%d].%s", i, f) }
	if phase.Lifecycle() {
		ph = &PointHook{name: r.Name, point: phase, match: match, failOpen: failOpen, concurrent: r.Concurrent}
		errs = compilePointKind(ph, kind, r, opts, field)
		if len(errs) > 0 {
			return nil, nil, errs
		}
		return nil, ph, nil
	}
	h = &hook{name: r.Name, phase: phase, match: match, failOpen: failOpen}
	switch kind {
	case "command":
		errs = compileCommand(h, r, opts, func(f string) string { return field("command." + f) })
	case "plugin":
		errs = compilePluginTool(h, r, opts, field("plugin"))
	case "block_when":
		errs = compileBlockWhen(h, r, field("block_when"))
	case "set_args":
		errs = compileSetArgs(h, r, field("set_args"))
	case "redact":
		errs = compileRedact(h, r, field("redact"))
	case "truncate":
		errs = compileTruncate(h, r, field("truncate"))
	}
	if len(errs) > 0 {
		return nil, nil, errs
	}
	return h, nil, nil
}

// kindAt lists the points a kind of rule works at.
func kindAt(kind string) []kernel.HookPoint {
	if ps := kindPoints[kind]; ps != nil {
		return ps
	}
	return kernel.HookPoints()
}

// compilePointKind compiles a rule of kind at a lifecycle point into ph.fn.
func compilePointKind(ph *PointHook, kind string, r Rule, opts Options, field func(string) string) []error {
	switch kind {
	case "command":
		return compilePointCommand(ph, r, opts, func(f string) string { return field("command." + f) })
	case "plugin":
		return compilePluginPoint(ph, r, opts, field("plugin"))
	case "block_when":
		return compilePointBlockWhen(ph, r, field("block_when"))
	case "set_context":
		return compileSetContext(ph, r, field("set_context"))
	case "redact":
		return compilePointRedact(ph, r, field("redact"))
	}
	return []error{hookError(r.Name, field(kind), fmt.Errorf("a %s hook does not work at %s", kind, ph.point))}
}
