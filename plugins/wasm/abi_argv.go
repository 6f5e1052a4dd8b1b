package wasm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/kernel"
)

// callArgv runs an unmodified WASI program: the tool's templates turn the
// arguments into argv and stdin, and stdout is the result. A non-zero exit
// is a failed call whose message carries stderr, which is where such
// programs explain themselves.
func (t *tool) callArgv(q *queued, args json.RawMessage) (kernel.Result, error) {
	argv, stdin, err := t.renderArgv(args)
	if err != nil {
		return kernel.Result{}, t.fail("invalid_args", err)
	}
	ch, err := t.m.reserve(q.ctx)
	if err != nil {
		return kernel.Result{Content: err.Error(), IsError: true}, t.wrap(err)
	}
	ctx, cancel := q.begin()
	x := newInstanceIO(t.m.eff.maxOutput)
	x.attach(ctx, cancel)
	in, err := t.m.instantiate(ctx, ch, x, bytes.NewReader(stdin), argv)
	if in != nil {
		in.overflowed = stackOverflow(err)
		in.close()
	}
	if err := describeExit(ctx, err, x, "run"); err != nil {
		return kernel.Result{Content: err.Error(), IsError: true}, t.wrap(err)
	}
	return kernel.Result{Content: validUTF8(string(x.output()))}, nil
}

// renderArgv executes the argv templates over the call's arguments.
// argv[0] is the module name; elements that render empty are left out.
func (t *tool) renderArgv(args json.RawMessage) ([]string, []byte, error) {
	var data map[string]any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if err := dec.Decode(&data); err != nil {
		return nil, nil, fmt.Errorf("%w: arguments must be a JSON object: %v", kernel.ErrInvalidArgs, err)
	}
	// text/template prints a value the arguments lack as "<no value>". It
	// is a missing argument only if no argument says it itself.
	given := mentionsNoValue(data)
	missing := func(what, tpl string) error {
		return fmt.Errorf("%w: render %s of tool %s: %q prints an argument the call did not give (the manifest should guard optional ones with {{if}})", kernel.ErrInvalidArgs, what, t.spec.Name, tpl)
	}
	argv := []string{t.m.name}
	var b strings.Builder
	for i, tpl := range t.def.args {
		b.Reset()
		if err := tpl.Execute(&b, data); err != nil {
			return nil, nil, fmt.Errorf("render argv[%d] of tool %s: %w", i+1, t.spec.Name, err)
		}
		if s := b.String(); s != "" {
			if !given && strings.Contains(s, noValue) {
				return nil, nil, missing(fmt.Sprintf("argv[%d]", i+1), t.def.Argv.Args[i])
			}
			argv = append(argv, s)
		}
	}
	var stdin []byte
	if t.def.stdin != nil {
		var sb bytes.Buffer
		if err := t.def.stdin.Execute(&sb, data); err != nil {
			return nil, nil, fmt.Errorf("render stdin of tool %s: %w", t.spec.Name, err)
		}
		if !given && bytes.Contains(sb.Bytes(), []byte(noValue)) {
			return nil, nil, missing("stdin", *t.def.Argv.Stdin)
		}
		stdin = sb.Bytes()
	}
	return argv, stdin, nil
}

// noValue is what text/template prints for a missing map entry.
const noValue = "<no value>"

// mentionsNoValue reports whether any string (key or value) in decoded
// JSON contains noValue.
func mentionsNoValue(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.Contains(v, noValue)
	case map[string]any:
		for k, e := range v {
			if strings.Contains(k, noValue) || mentionsNoValue(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if mentionsNoValue(e) {
				return true
			}
		}
	}
	return false
}
