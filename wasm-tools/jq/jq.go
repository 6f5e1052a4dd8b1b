package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/itchyny/gojq"

	"github.com/agentkernel/agentkernel/sdk/wasmtool"
)

// args are the jq tool's arguments (see tool.json).
type args struct {
	Filter string          `json:"filter"`
	Input  json.RawMessage `json:"input"`
	File   string          `json:"file"`
	Raw    bool            `json:"raw"`
	Limit  int             `json:"limit"`
}

// defaultLimit bounds the number of results, so a filter like `range(1e9)`
// ends with a message instead of at the output limit.
const defaultLimit = 1000

func handle(req wasmtool.Request) (wasmtool.Result, error) {
	if req.Tool != "jq" {
		return wasmtool.Result{}, fmt.Errorf("%w %q", wasmtool.ErrUnknownTool, req.Tool)
	}
	var a args
	if err := wasmtool.DecodeArgs(req.Args, &a); err != nil {
		return wasmtool.Result{}, err
	}
	return run(a)
}

// run compiles the filter and runs it on every input value: the input
// argument, or each JSON value in the file, or null when neither is given.
// Results are one per line, compact JSON (strings unquoted with raw).
func run(a args) (wasmtool.Result, error) {
	if strings.TrimSpace(a.Filter) == "" {
		return wasmtool.Errorf("filter is empty; for the identity use ."), nil
	}
	if len(a.Input) > 0 && a.File != "" {
		return wasmtool.Errorf("give input or file, not both"), nil
	}
	limit := a.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	q, err := gojq.Parse(a.Filter)
	if err != nil {
		return wasmtool.Errorf("jq: parse %q: %v", a.Filter, err), nil
	}
	code, err := gojq.Compile(q, gojq.WithEnvironLoader(os.Environ))
	if err != nil {
		return wasmtool.Errorf("jq: compile %q: %v", a.Filter, err), nil
	}

	var src io.Reader = strings.NewReader("null")
	switch {
	case len(a.Input) > 0:
		src = bytes.NewReader(a.Input)
	case a.File != "":
		f, err := os.Open(a.File)
		if err != nil {
			return wasmtool.Errorf("jq: %v (files are readable only in the directories the operator mounted)", err), nil
		}
		defer f.Close()
		src = f
	}
	dec := json.NewDecoder(src)
	dec.UseNumber()

	var out strings.Builder
	n := 0
	for {
		var v any
		if err := dec.Decode(&v); err == io.EOF {
			break
		} else if err != nil {
			return wasmtool.Errorf("jq: input is not JSON: %v", err), nil
		}
		iter := code.Run(v)
		for {
			r, ok := iter.Next()
			if !ok {
				break
			}
			if err, isErr := r.(error); isErr {
				var halt *gojq.HaltError
				if errors.As(err, &halt) && halt.Value() == nil {
					return wasmtool.Text(out.String()), nil // halt: stop quietly
				}
				return wasmtool.Result{Content: out.String() + "jq: error: " + err.Error(), IsError: true}, nil
			}
			if n == limit {
				return wasmtool.Result{Content: out.String() + fmt.Sprintf("jq: stopped after %d results (limit)", limit), IsError: true}, nil
			}
			if s, isStr := r.(string); isStr && a.Raw {
				out.WriteString(s)
			} else {
				b, err := gojq.Marshal(r)
				if err != nil {
					return wasmtool.Errorf("jq: encode result: %v", err), nil
				}
				out.Write(b)
			}
			out.WriteByte('\n')
			n++
		}
	}
	return wasmtool.Text(out.String()), nil
}
