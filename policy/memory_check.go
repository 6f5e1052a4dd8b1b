package policy

import (
	"slices"
	"strconv"
	"strings"
)

// checkMemoryTest checks the memory part of a test's shape: a memory
// expectation needs input.memory, names refuse or inject, and the rules it
// names are memory rules of the file; the input's hits have valid roles
// and sources.
func (p *Policy) checkMemoryTest(ps *problems, t *testDoc, where string) {
	x := &t.Expect
	if x.wantsMemory() && t.Input.Memory == nil {
		ps.at(StageSyntax, t.Name.At, where, "a test that expects a memory ruling needs input.memory (its hits)")
	}
	if x.wantsExclusion() && (t.Input.Memory == nil || t.Input.Memory.Chunk == nil) {
		ps.at(StageSyntax, t.Name.At, where, "a test that expects excluded needs input.memory.chunk (the chunk to index)")
	}
	switch x.Memory.V {
	case "", "inject", "refuse":
	default:
		ps.at(StageSyntax, x.Memory.At, where, "expect.memory must be inject or refuse, got %q", x.Memory.V)
	}
	ids := map[string]bool{}
	for _, r := range p.memRules {
		ids[r.id] = true
	}
	for _, list := range []*[]string{x.MemoryRules, x.WouldRefuse} {
		if list == nil {
			continue
		}
		for _, id := range *list {
			if !ids[id] {
				ps.at(StageLint, t.Name.At, where, "expects memory rule %q, which the file does not define", id)
			}
		}
	}
	if t.Input.Memory == nil {
		return
	}
	switch t.Input.Memory.Scope {
	case "", "session", "owner", "workspace":
	default:
		ps.at(StageSyntax, t.Name.At, where, "input.memory.scope must be session, owner or workspace, got %q", t.Input.Memory.Scope)
	}
	if ch := t.Input.Memory.Chunk; ch != nil {
		switch ch.Role {
		case "", "user", "assistant", "tool":
		default:
			ps.at(StageSyntax, t.Name.At, where, "input.memory.chunk.role must be user, assistant or tool, got %q", ch.Role)
		}
	}
	if ci := t.Input.Memory.Call; ci != nil && ci.Tool == "" {
		ps.at(StageSyntax, t.Name.At, where, "input.memory.call needs tool")
	}
	for i, h := range t.Input.Memory.Hits {
		switch h.Source {
		case "", "text", "vector", "hybrid":
		default:
			ps.at(StageSyntax, t.Name.At, where, "input.memory.hits[%d].source must be text, vector or hybrid, got %q", i, h.Source)
		}
		switch h.Role {
		case "", "user", "assistant", "tool":
		default:
			ps.at(StageSyntax, t.Name.At, where, "input.memory.hits[%d].role must be user, assistant or tool, got %q", i, h.Role)
		}
	}
}

// retrieval is the test input's retrieval with its defaults: scope
// session, source text, role user.
func (in *Input) retrieval() MemoryRetrieval {
	r := MemoryRetrieval{Scope: "session"}
	if in.Memory == nil {
		return r
	}
	if in.Memory.Scope != "" {
		r.Scope = in.Memory.Scope
	}
	r.Hits = slices.Clone(in.Memory.Hits)
	for i := range r.Hits {
		h := &r.Hits[i]
		if h.Source == "" {
			h.Source = "text"
		}
		if h.Role == "" {
			h.Role = "user"
		}
	}
	return r
}

// checkMemory rules on the test's retrieval, counts the memory rules that
// matched towards coverage, and compares the ruling with the
// expectations.
func (p *Policy) checkMemory(c *testCheck) {
	x := c.x
	tr := p.newMemTrace()
	d := p.memory(c.run.m, c.env(), c.in.retrieval(), tr)
	for i, r := range p.memRules {
		if tr.matched[i] {
			c.run.cov.memory[i]++
		}
		if err := tr.errs[i]; err != nil {
			c.fail("memory rule %s: %v", r.id, err)
		}
	}
	got := "inject"
	if d.Refused {
		got = "refuse"
	}
	if x.Memory.Set && got != x.Memory.V {
		why := ""
		if d.Refused {
			why = " (" + d.Message + ")"
		}
		c.fail("memory = %s, want %s%s", got, x.Memory.V, why)
	}
	if x.Dropped != nil {
		var g, w []string
		for _, dr := range d.Dropped {
			g = append(g, strconv.Itoa(dr.Rank))
		}
		for _, r := range *x.Dropped {
			w = append(w, strconv.Itoa(r))
		}
		compareSet(c.fail, "dropped", g, &w)
	}
	compareSet(c.fail, "memory_rules", d.Rules(), x.MemoryRules)
	compareSet(c.fail, "would_refuse", d.WouldRefuse, x.WouldRefuse)
}

// memoryRanks formats ranks for explain: "1, 3".
func memoryRanks(ds []MemoryDropped, rule string) string {
	var out []string
	for _, d := range ds {
		if d.Rule == rule {
			out = append(out, strconv.Itoa(d.Rank))
		}
	}
	return strings.Join(out, ", ")
}
