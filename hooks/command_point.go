package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/agentkernel/agentkernel/internal/schema"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/schemas"
)

// A command hook at a lifecycle point reads the point's input
// (schemas/hook-input.schema.json, $defs/<point>) and answers with a
// Reply (schemas/hook-output.schema.json, $defs/<point>), or exits with
// code 2 to block with its stderr as the reason: the tool hooks'
// protocol, with the point's fields.

func compilePointCommand(ph *PointHook, r Rule, opts Options, field func(string) string) []error {
	ch, errs := newCommandHook(r, ph.point, opts, field)
	if errs != nil {
		return errs
	}
	concurrent := ph.concurrent
	ph.fn = func(ctx context.Context, in PointInput) (Reply, error) {
		doc, err := PointDocument(ch.name, in, concurrent)
		if err != nil {
			return Reply{}, fmt.Errorf("encode the hook input: %w", err)
		}
		reply, block, err := ch.exec(ctx, doc)
		switch {
		case err != nil:
			return Reply{}, err
		case block != nil:
			return Reply{Decision: Block, Reason: *block}, nil
		}
		return parseWithMessage(in.Info().Point, reply, ch.message)
	}
	return nil
}

// parseWithMessage is ParseReply with a rule's message as the reason of a
// block that gives none.
func parseWithMessage(point kernel.HookPoint, reply []byte, message string) (Reply, error) {
	rep, err := ParseReply(point, reply)
	if err != nil {
		return Reply{}, err
	}
	if rep.Decision == Block && rep.Reason == "" {
		rep.Reason = message
	}
	return *rep, nil
}

// PointDocument is the JSON document a command or plugin hook named hook
// reads at a lifecycle point: the protocol's version, the hook's name and
// the point's input, on one line (schemas/hook-input.schema.json).
// concurrent marks a guardrail running beside the model call.
func PointDocument(hook string, in PointInput, concurrent bool) ([]byte, error) {
	type envelope struct {
		Version    int    `json:"version"`
		Hook       string `json:"hook"`
		Concurrent bool   `json:"concurrent,omitempty"`
	}
	var v any
	env := envelope{Version: 1, Hook: hook, Concurrent: concurrent}
	switch in := in.(type) {
	case *kernel.RunStartInput:
		v = struct {
			envelope
			*kernel.RunStartInput
		}{env, in}
	case *kernel.BeforeCompactInput:
		v = struct {
			envelope
			*kernel.BeforeCompactInput
		}{env, in}
	case *kernel.BeforeModelInput:
		v = struct {
			envelope
			*kernel.BeforeModelInput
		}{env, in}
	case *kernel.AfterModelInput:
		v = struct {
			envelope
			*kernel.AfterModelInput
		}{env, in}
	case *kernel.RunEndInput:
		v = struct {
			envelope
			*kernel.RunEndInput
		}{env, in}
	default:
		return nil, fmt.Errorf("%T is not the input of a lifecycle point", in)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseReply decodes the reply of a command or plugin hook at a lifecycle
// point and validates it against the point's $defs entry of
// schemas/hook-output.schema.json; empty means allow. The error says what
// is wrong and where.
func ParseReply(point kernel.HookPoint, reply []byte) (*Reply, error) {
	reply = bytes.TrimSpace(reply)
	if len(reply) == 0 {
		return &Reply{}, nil
	}
	inst, err := decodeJSON(reply)
	if err != nil {
		return nil, fmt.Errorf("the reply is not JSON (%v): %q", err, excerpt(reply))
	}
	all, err := replySchemas()
	if err != nil {
		return nil, err
	}
	s, ok := all["#/$defs/"+string(point)]
	if !ok {
		return nil, fmt.Errorf("%q is not a lifecycle point", point)
	}
	if err := s.Validate(inst); err != nil {
		return nil, fmt.Errorf("the reply does not match schemas/hook-output.schema.json#/$defs/%s: %s", point, describe(err))
	}
	var rep Reply
	if err := json.Unmarshal(reply, &rep); err != nil {
		return nil, fmt.Errorf("decode the reply: %w", err)
	}
	return &rep, nil
}

// replySchemas are the lifecycle points' reply schemas, compiled once.
var replySchemas = sync.OnceValues(func() (map[string]*schema.Schema, error) {
	data, err := schemas.FS.ReadFile("hook-output.schema.json")
	if err != nil {
		return nil, err
	}
	var refs []string
	for _, p := range lifecycle() {
		refs = append(refs, "#/$defs/"+string(p))
	}
	return schema.CompileRefs("schemas/hook-output.schema.json", data, refs)
})
