package kernel

import (
	"fmt"
	"slices"
)

// entry returns the named tool's registry entry.
func (r *Registry) entry(name string) (*entry, bool) {
	r.mu.RLock()
	e, ok := r.byName[name]
	r.mu.RUnlock()
	return e, ok
}

// view returns the specs of every tool, in registration order, as a slice
// shared by every caller until the registry changes: it must not be
// modified. The loop takes one view per generation.
func (r *Registry) view() []ToolSpec {
	r.mu.RLock()
	s := r.specs
	r.mu.RUnlock()
	if s != nil || r.Len() == 0 {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.specs == nil {
		r.specs = make([]ToolSpec, len(r.order))
		for i, e := range r.order {
			r.specs[i] = e.spec
		}
	}
	return r.specs
}

// Sync makes tools the registered tools of source (ToolSpec.Source): tools
// of source that tools no longer lists are removed, new ones added, changed
// ones replaced. It is how a source whose tool list changes at run time (an
// MCP server's tools/list_changed) updates the registry; the running loop
// sees the change at its next generation, and a call of a removed tool
// fails as an unknown tool.
//
// A tool that does not register (bad name, tier or schema, or a name taken
// by another source) is left out and reported in the returned errors, each a
// *RegistrationError; the others are still synced.
func (r *Registry) Sync(source string, tools []Tool) []error {
	var errs []error
	fresh := make([]*entry, 0, len(tools))
	seen := map[string]bool{}
	for _, t := range tools {
		e, err := compileTool(t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if e.spec.Source != source {
			errs = append(errs, &RegistrationError{Tool: e.spec.Name, Err: fmt.Errorf("its source is %q, not %q", e.spec.Source, source)})
			continue
		}
		if seen[e.spec.Name] {
			errs = append(errs, &RegistrationError{Tool: e.spec.Name, Err: ErrDuplicateTool})
			continue
		}
		seen[e.spec.Name] = true
		fresh = append(fresh, e)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	byName := make(map[string]*entry, len(r.byName)+len(fresh))
	order := make([]*entry, 0, len(r.order)+len(fresh))
	placed := map[string]bool{}
	for _, e := range r.order {
		if e.spec.Source != source {
			byName[e.spec.Name] = e
			order = append(order, e)
			continue
		}
		// Keep the position of a tool that stays.
		if i := slices.IndexFunc(fresh, func(f *entry) bool { return f.spec.Name == e.spec.Name }); i >= 0 {
			byName[e.spec.Name] = fresh[i]
			order = append(order, fresh[i])
			placed[e.spec.Name] = true
		}
	}
	for _, e := range fresh {
		if placed[e.spec.Name] {
			continue
		}
		if _, taken := byName[e.spec.Name]; taken {
			errs = append(errs, &RegistrationError{Tool: e.spec.Name, Err: ErrDuplicateTool})
			continue
		}
		byName[e.spec.Name] = e
		order = append(order, e)
	}
	r.byName, r.order, r.specs = byName, order, nil
	return errs
}
