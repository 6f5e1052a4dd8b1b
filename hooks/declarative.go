package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"strings"

	"github.com/expr-lang/expr"

	"github.com/agentkernel/agentkernel/kernel"
)

// compileBlockWhen: block the call (before) or withhold the result (after)
// when the expression holds.
func compileBlockWhen(h *hook, r Rule, field string) []error {
	p, err := compileExpr(r.BlockWhen, expr.AsBool())
	if err != nil {
		return []error{hookError(r.Name, field, err)}
	}
	reason := r.Message
	if reason == "" {
		reason = fmt.Sprintf("the call matches %s", r.BlockWhen)
	}
	eval := func(env *Env) (Verdict, error) {
		out, err := run(p, env)
		releaseEnv(env)
		if err != nil {
			return Verdict{}, fmt.Errorf("block_when: %w", err)
		}
		if b, _ := out.(bool); b {
			return Verdict{Block: true, Reason: reason}, nil
		}
		return Verdict{}, nil
	}
	if h.phase == PhaseBefore {
		h.before = func(_ context.Context, c *kernel.Call) (Verdict, error) {
			return eval(envFor(c, PhaseBefore, nil, nil))
		}
	} else {
		h.after = func(_ context.Context, c *kernel.Call, res kernel.Result, err error) (Verdict, error) {
			return eval(envFor(c, PhaseAfter, &res, err))
		}
	}
	return nil
}

// compileSetArgs: merge the map the expression yields into the arguments
// (a key set to nil is removed); the result is validated against the
// tool's schema again.
func compileSetArgs(h *hook, r Rule, field string) []error {
	p, err := compileMapExpr(r.SetArgs)
	if err != nil {
		return []error{hookError(r.Name, field, err)}
	}
	h.before = func(_ context.Context, c *kernel.Call) (Verdict, error) {
		env := envFor(c, PhaseBefore, nil, nil)
		out, err := run(p, env)
		releaseEnv(env)
		if err != nil {
			return Verdict{}, fmt.Errorf("set_args: %w", err)
		}
		set, ok := out.(map[string]any)
		if !ok {
			return Verdict{}, fmt.Errorf("set_args returned %T, not a map", out)
		}
		old := c.Value()
		changed := false
		for k, v := range set {
			ov, had := old[k]
			if (v == nil && had) || (v != nil && (!had || !sameJSON(ov, v))) {
				changed = true
				break
			}
		}
		if !changed {
			return Verdict{}, nil
		}
		args := maps.Clone(old)
		if args == nil {
			args = map[string]any{}
		}
		for k, v := range set {
			if v == nil {
				delete(args, k)
			} else {
				args[k] = v
			}
		}
		raw, err := json.Marshal(args)
		if err != nil {
			return Verdict{}, fmt.Errorf("set_args: encode the arguments: %w", err)
		}
		return Verdict{Args: raw}, nil
	}
	return nil
}

// sameJSON reports whether a (decoded JSON) and b (an expression's value)
// encode to the same JSON value; numbers compare by value.
func sameJSON(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	switch a := a.(type) {
	case nil:
		return b == nil
	case string:
		bs, ok := b.(string)
		return ok && a == bs
	case bool:
		bb, ok := b.(bool)
		return ok && a == bb
	case []any:
		bl, ok := b.([]any)
		if !ok || len(a) != len(bl) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], bl[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			w, ok := bm[k]
			if !ok || !sameJSON(v, w) {
				return false
			}
		}
		return true
	}
	return false // anything else: assume a change and let the schema decide
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// compileRedact: replace every match of the patterns in the result with
// [REDACTED] (only the first group when the pattern has one).
func compileRedact(h *hook, r Rule, field string) []error {
	res, errs := compilePatterns(r, field)
	if errs != nil {
		return errs
	}
	h.after = func(_ context.Context, _ *kernel.Call, result kernel.Result, _ error) (Verdict, error) {
		out, n := redactAll(result.Content, res)
		if n == 0 {
			return Verdict{}, nil
		}
		result.Content = out
		return Verdict{Result: &result, what: "redacted"}, nil
	}
	return nil
}

func redactAll(s string, res []*regexp.Regexp) (string, int) {
	var spans []Finding
	for _, re := range res {
		for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
			start, end := m[0], m[1]
			if len(m) >= 4 && m[2] >= 0 {
				start, end = m[2], m[3]
			}
			if end > start {
				spans = append(spans, Finding{Start: start, End: end})
			}
		}
	}
	spans = merge(spans)
	if len(spans) == 0 {
		return s, 0
	}
	var b strings.Builder
	at := 0
	for _, x := range spans {
		b.WriteString(s[at:x.Start])
		b.WriteString(Redacted)
		at = x.End
	}
	b.WriteString(s[at:])
	return b.String(), len(spans)
}

// compileTruncate: keep the head and tail of a long result.
func compileTruncate(h *hook, r Rule, field string) []error {
	t := r.Truncate
	if t.Head < 0 || t.Tail < 0 || t.Head+t.Tail == 0 {
		return []error{hookError(r.Name, field, fmt.Errorf("head and tail must not be negative and not both zero, got %d and %d", t.Head, t.Tail))}
	}
	name := fmt.Sprintf("hook %q", r.Name)
	h.after = func(_ context.Context, _ *kernel.Call, res kernel.Result, _ error) (Verdict, error) {
		out, cut := TruncateMiddle(res.Content, t.Head, t.Tail, name)
		if !cut {
			return Verdict{}, nil
		}
		res.Content = out
		return Verdict{Result: &res, what: "truncated"}, nil
	}
	return nil
}
