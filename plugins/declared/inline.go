package declared

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/tool"
)

// InlineTool is a declared inline tool: its answer is written in the
// configuration (canned guidance, a feature flag, a test double), with
// the call's arguments filled in. It runs nothing. It is safe for
// concurrent use.
type InlineTool struct {
	spec tool.Spec
	text template
	json *valueTemplate
}

func newInline(c InlineConfig) (*InlineTool, error) {
	schema, err := parseArgSchema(c.Args)
	if err != nil {
		return nil, fieldErr("args", "%v", err)
	}
	t := &InlineTool{}
	switch {
	case c.Text != "" && c.JSON != nil:
		return nil, fieldErr("json", "set text or json, not both")
	case c.JSON != nil:
		vt, err := parseValueTemplate(c.JSON)
		if err != nil {
			return nil, fieldErr("json", "%v", err)
		}
		var bad error
		vt.walk(func(tm template) {
			if len(tm.secrets()) > 0 && bad == nil {
				bad = errors.New("an inline answer is shown to the model: it cannot hold a secret (${env:...})")
			}
			if err := schema.check(tm.args()); err != nil && bad == nil {
				bad = err
			}
		})
		if bad != nil {
			return nil, fieldErr("json", "%v", bad)
		}
		t.json = &vt
	case c.Text != "":
		if t.text, err = parseTemplate(c.Text); err != nil {
			return nil, fieldErr("text", "%v", err)
		}
		if len(t.text.secrets()) > 0 {
			return nil, fieldErr("text", "an inline answer is shown to the model: it cannot hold a secret (${env:...})")
		}
		if err := schema.check(t.text.args()); err != nil {
			return nil, fieldErr("text", "%v", err)
		}
	default:
		return nil, fieldErr("text", "set the answer: text (a template) or json (a value)")
	}
	tier := c.Tier
	if tier == "" {
		tier = tool.TierReadOnly
	}
	t.spec = tool.Spec{Name: c.Name, Description: c.Description, Schema: schema.raw, Tier: tier, Source: SourceInline}
	return t, nil
}

// Spec describes the tool.
func (t *InlineTool) Spec() tool.Spec { return t.spec }

// Call renders the answer: an absent argument renders as nothing in text,
// and leaves its field out of a json answer.
func (t *InlineTool) Call(_ context.Context, raw json.RawMessage) (tool.Result, error) {
	args, err := decodeArgs(raw)
	if err != nil {
		return tool.Result{}, err
	}
	if t.json != nil {
		v, err := t.json.build(args, nil)
		if err != nil {
			return tool.Result{}, err
		}
		b, err := marshal(v)
		return tool.Result{Content: string(b)}, err
	}
	var out []byte
	for _, p := range t.text {
		switch {
		case p.arg != "":
			if v, ok := args[p.arg]; ok {
				s, err := text(p.arg, v)
				if err != nil {
					return tool.Result{}, err
				}
				out = append(out, s...)
			}
		default:
			out = append(out, p.lit...)
		}
	}
	return tool.Result{Content: string(out)}, nil
}

var _ kernel.Tool = (*InlineTool)(nil)
