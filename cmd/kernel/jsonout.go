package main

import (
	"context"
	"fmt"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/policy"
)

// The --json outputs. Field names are snake_case like the event stream's;
// times are RFC 3339 and durations strings ("1m30s"), never nanoseconds.

// sessionList is `kernel sessions ls --json`: an array, empty when there
// are no sessions.
func sessionList(list []kernel.SessionMeta) []kernel.SessionMeta {
	if list == nil {
		return []kernel.SessionMeta{}
	}
	return list
}

// sessionDoc is `kernel sessions show ID --json`.
type sessionDoc struct {
	Meta     kernel.SessionMeta `json:"meta"`
	Messages []kernel.Message   `json:"messages"`
	Pending  *kernel.Approval   `json:"pending,omitempty"`
}

func sessionJSON(s *kernel.Session) sessionDoc {
	msgs := s.Messages
	if msgs == nil {
		msgs = []kernel.Message{}
	}
	return sessionDoc{Meta: s.Meta, Messages: msgs, Pending: s.Pending}
}

// toolJSON is one tool in `kernel tools --json`: the spec, with its timeout
// as a duration string, and what it is granted (the GRANTED column, whole).
type toolJSON struct {
	kernel.ToolSpec
	Timeout string `json:"timeout,omitempty"`
	Granted string `json:"granted,omitempty"`
}

func toolsJSON(specs []kernel.ToolSpec) []toolJSON {
	out := make([]toolJSON, len(specs))
	for i, s := range specs {
		out[i] = toolJSON{ToolSpec: s}
		if s.Timeout > 0 {
			out[i].Timeout = s.Timeout.String()
		}
	}
	return out
}

// policyTestJSON is one file of `kernel policy test --json`.
type policyTestJSON struct {
	File     string           `json:"file"`
	Policy   string           `json:"policy,omitempty"`
	Revision string           `json:"revision,omitempty"`
	Passed   bool             `json:"passed"`
	Error    string           `json:"error,omitempty"` // the file does not compile
	Tests    []policyTestCase `json:"tests"`
	Untested []string         `json:"untested,omitempty"`
}

type policyTestCase struct {
	Name     string   `json:"name"`
	Line     int      `json:"line"`
	Passed   bool     `json:"passed"`
	Failures []string `json:"failures,omitempty"`
}

// policyTests runs each file's tests for --json; ok is false when any file
// does not compile or fails. err is set only when ctx is done.
func policyTests(ctx context.Context, paths []string, opts policy.Options) (out []policyTestJSON, ok bool, err error) {
	ok = true
	out = []policyTestJSON{}
	for _, path := range paths {
		f := policyTestJSON{File: path, Tests: []policyTestCase{}}
		p, err := policy.CompileFile(ctx, path, opts)
		if err != nil && ctx.Err() != nil {
			return nil, false, err
		}
		if err != nil {
			f.Error, ok = err.Error(), false
			out = append(out, f)
			continue
		}
		rep, err := p.RunTests(ctx)
		if err != nil {
			return nil, false, fmt.Errorf("policy %s: cancelled while testing: %w", path, err)
		}
		f.Policy, f.Revision, f.Passed = rep.Policy, rep.Revision, rep.Passed()
		for i := range rep.Results {
			r := &rep.Results[i]
			f.Tests = append(f.Tests, policyTestCase{Name: r.Name, Line: r.Line, Passed: r.Passed(), Failures: r.Failures})
		}
		for _, u := range rep.Untested {
			f.Untested = append(f.Untested, u.String())
		}
		ok = ok && f.Passed
		out = append(out, f)
	}
	return out, ok, nil
}
