package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/expr-lang/expr/vm"

	"github.com/agentkernel/agentkernel/kernel"
)

// A memory: rule with effect exclude keeps chunks out of memory's index
// (docs/memory.md, "Policy"). It runs once per chunk, before the chunk is
// indexed, with the chunk in chunk and, for a tool result, the call it
// answers in call (built as for tool rules, so call.paths are the cleaned
// path arguments). The first enforcing match excludes the chunk; an error
// counts as a match (fail closed); a dry-run rule is only reported.

// MemoryExclude is the effect of a memory: rule that keeps chunks out of
// the index.
const MemoryExclude = "exclude"

// MemoryChunk is a chunk about to be indexed, in exclude rules (the zero
// value everywhere else). Its yaml keys are those of a test input's
// memory.chunk.
type MemoryChunk struct {
	// Session and Seq say which stored message it is part of, Part which
	// part (0 for the first).
	Session string `expr:"session" yaml:"session"`
	Seq     int    `expr:"seq" yaml:"seq"`
	Part    int    `expr:"part" yaml:"part"`
	// Role is user, assistant or tool; Tool the tool whose result it is.
	Role string `expr:"role" yaml:"role"`
	Tool string `expr:"tool" yaml:"tool"`
	// Text is the chunk's text as stored (scrubbed).
	Text string `expr:"text" yaml:"text"`
	// Owner is the session's owner (serve.owner label, "" outside kernel
	// serve); Workspace the workspace the session ran in.
	Owner     string `expr:"owner" yaml:"owner"`
	Workspace string `expr:"workspace" yaml:"workspace"`
}

// MemoryExclusion is the policy's ruling on indexing one chunk.
type MemoryExclusion struct {
	// Excluded is set when an enforcing exclude rule matched: the chunk
	// is not indexed. Rule is that rule; Err its evaluation error, if
	// that is why it matched.
	Excluded bool   `json:"excluded"`
	Rule     string `json:"rule,omitempty"`
	Err      string `json:"error,omitempty"`
	// WouldExclude are the dry-run exclude rules that matched.
	WouldExclude []string      `json:"would_exclude,omitempty"`
	EvalTime     time.Duration `json:"eval_time"`
}

// HasExcludeRules reports whether the memory: section has an exclude
// rule; without one Exclude indexes every chunk.
func (p *Policy) HasExcludeRules() bool {
	for _, r := range p.memRules {
		if r.exclude {
			return true
		}
	}
	return false
}

// Exclude rules on indexing the chunk ch; call is the call a tool result
// answers (nil for other chunks, or when it is unknown); st gives the
// session section (nil: only session.id, from the chunk).
func (p *Policy) Exclude(_ context.Context, st *kernel.State, ch MemoryChunk, call *kernel.Call) MemoryExclusion {
	start := time.Now()
	if st == nil {
		st = &kernel.State{SessionID: ch.Session}
	}
	env, m := borrow(st)
	if call != nil {
		env.fillCall(call, p.entry(call.Tool().Name).extractor(call.Tool().Schema))
	}
	d := p.exclude(m, env, ch, nil)
	giveBack(env, m)
	d.EvalTime = time.Since(start)
	return d
}

func (p *Policy) exclude(m *vm.VM, env *Env, ch MemoryChunk, tr *memTrace) MemoryExclusion {
	var d MemoryExclusion
	env.Chunk = ch
	p.applyMemoryRules(m, env, tr, isExclude, &d.Excluded, func(mr *memoryRule, err error) {
		switch {
		case mr.dryrun:
			d.WouldExclude = append(d.WouldExclude, mr.id)
		case !d.Excluded:
			d.Excluded, d.Rule = true, mr.id
			if err != nil {
				d.Err = fmt.Sprintf("memory rule %s could not be evaluated, so it applies (fail closed): %v", mr.id, err)
			}
		}
	})
	env.Chunk = MemoryChunk{}
	return d
}

// checkExclude rules on the test's chunk (and call), counts the exclude
// rules that matched towards coverage, and compares with excluded.
func (p *Policy) checkExclude(c *testCheck) {
	mi := c.in.Memory
	if mi == nil || mi.Chunk == nil {
		return // reported when the file was checked
	}
	env := c.env()
	ch, call, err := mi.chunkInput(p.specs, c.st)
	if err != nil {
		c.fail("%v", err)
		return
	}
	if call != nil {
		env.fillCall(call, c.run.extractor(call.Tool().Name, call.Tool().Schema))
	}
	tr := p.newMemTrace()
	d := p.exclude(c.run.m, env, ch, tr)
	for i, r := range p.memRules {
		if !r.exclude {
			continue
		}
		if tr.matched[i] {
			c.run.cov.memory[i]++
		}
		if err := tr.errs[i]; err != nil {
			c.fail("memory rule %s: %v", r.id, err)
		}
	}
	if x := c.x.Excluded; x != nil && d.Excluded != *x {
		why := ""
		if d.Excluded {
			why = " (by " + d.Rule + ")"
		}
		c.fail("excluded = %t, want %t%s", d.Excluded, *x, why)
	}
}

// chunkInput is a test input's chunk with its defaults (role tool with a
// tool or a call, else user; tool the call's; session the state's) and
// the call memory.call describes (nil without one).
func (r *MemoryRetrieval) chunkInput(specs *specSet, st *kernel.State) (MemoryChunk, *kernel.Call, error) {
	ch := *r.Chunk
	if ch.Role == "" {
		ch.Role = "user"
		if ch.Tool != "" || r.Call != nil {
			ch.Role = "tool"
		}
	}
	if ch.Tool == "" && r.Call != nil {
		ch.Tool = r.Call.Tool
	}
	if ch.Session == "" && st != nil {
		ch.Session = st.SessionID
	}
	if r.Call == nil {
		return ch, nil, nil
	}
	in := Input{Call: *r.Call}
	call, err := in.call(specs, st)
	if err != nil {
		return ch, nil, fmt.Errorf("input.memory.call: %w", err)
	}
	return ch, call, nil
}

// MarshalJSON writes eval_time as a Go duration string.
func (d MemoryExclusion) MarshalJSON() ([]byte, error) {
	type plain MemoryExclusion
	return json.Marshal(struct {
		plain
		EvalTime string `json:"eval_time"`
	}{plain(d), d.EvalTime.String()})
}
