package hooks

import (
	"context"
	"fmt"
	"reflect"
	"regexp"

	"github.com/expr-lang/expr"

	"github.com/agentkernel/agentkernel/kernel"
)

// The declarative kinds at the lifecycle points: block_when (every
// point), set_context (run_start, before_model) and redact (run_start's
// prompt, before_model's request, after_model's answer). Their
// expressions see Env as pointEnv fills it.

func compilePointBlockWhen(ph *PointHook, r Rule, field string) []error {
	p, err := compileExpr(r.BlockWhen, expr.AsBool())
	if err != nil {
		return []error{hookError(r.Name, field, err)}
	}
	reason := r.Message
	if reason == "" {
		reason = fmt.Sprintf("%s matches %s", ph.point, r.BlockWhen)
		if ph.point == kernel.PointRunEnd {
			reason = fmt.Sprintf("The run is not done yet: %s still holds. Keep working.", r.BlockWhen)
		}
	}
	ph.fn = func(_ context.Context, in PointInput) (Reply, error) {
		env := pointEnv(in)
		out, err := run(p, env)
		releaseEnv(env)
		if err != nil {
			return Reply{}, fmt.Errorf("block_when: %w", err)
		}
		if b, _ := out.(bool); b {
			return Reply{Decision: Block, Reason: reason}, nil
		}
		return Reply{}, nil
	}
	return nil
}

func compileSetContext(ph *PointHook, r Rule, field string) []error {
	p, err := compileExpr(r.SetContext, expr.AsKind(reflect.String))
	if err != nil {
		return []error{hookError(r.Name, field, err)}
	}
	ph.fn = func(_ context.Context, in PointInput) (Reply, error) {
		env := pointEnv(in)
		out, err := run(p, env)
		releaseEnv(env)
		if err != nil {
			return Reply{}, fmt.Errorf("set_context: %w", err)
		}
		s, ok := out.(string)
		if !ok {
			return Reply{}, fmt.Errorf("set_context returned %T, not a string", out)
		}
		return Reply{Context: s}, nil
	}
	return nil
}

func compilePointRedact(ph *PointHook, r Rule, field string) []error {
	res, errs := compilePatterns(r, field)
	if errs != nil {
		return errs
	}
	ph.fn = func(_ context.Context, in PointInput) (Reply, error) {
		return redactPoint(in, func(s string) (string, int) { return redactAll(s, res) }), nil
	}
	return nil
}

// compilePatterns compiles a redact rule's patterns.
func compilePatterns(r Rule, field string) ([]*regexp.Regexp, []error) {
	if len(r.Redact) == 0 {
		return nil, []error{hookError(r.Name, field, fmt.Errorf("needs at least one pattern"))}
	}
	var errs []error
	var res []*regexp.Regexp
	for i, p := range r.Redact {
		re, err := compilePattern(p)
		if err != nil {
			errs = append(errs, hookError(r.Name, fmt.Sprintf("%s[%d]", field, i), err))
			continue
		}
		res = append(res, re)
	}
	return res, errs
}

// redactPoint is the reply of a redaction at a lifecycle point: the
// prompt (run_start), the stored messages of the request (before_model),
// the answer's text and reasoning (after_model).
func redactPoint(in PointInput, redact func(string) (string, int)) Reply {
	rep := Reply{what: "redacted"}
	switch in := in.(type) {
	case *kernel.RunStartInput:
		if s, n := redact(in.Prompt); n > 0 {
			rep.Prompt = &s
		}
	case *kernel.BeforeModelInput:
		for _, m := range in.Messages {
			if m.Seq == 0 {
				continue // the system prompt and context not stored yet
			}
			if s, n := redact(m.Content); n > 0 {
				rep.Edits = append(rep.Edits, EditReply{Seq: m.Seq, Content: s})
			}
		}
	case *kernel.AfterModelInput:
		if s, n := redact(in.Answer.Content); n > 0 {
			rep.Text = &s
		}
		if s, n := redact(in.Answer.Reasoning); n > 0 {
			rep.Reasoning = &s
		}
	}
	return rep
}

// answerScrubber is the credential scrubber on model answers
// (scrubber.answers): an after_model hook named scrubber.
func answerScrubber(s *Scrubber) *PointHook {
	return &PointHook{name: NameScrubber, point: kernel.PointAfterModel, fn: func(_ context.Context, in PointInput) (Reply, error) {
		return redactPoint(in, s.Scrub), nil
	}}
}
