package kernel

import (
	"encoding/json"
	"maps"
	"slices"
)

// PathResolver is an optional interface of a Tool whose arguments name
// files. The kernel calls ResolvePaths when it prepares a call, before hooks
// and policy see it, and again after every SetArgs: rules then judge the
// file the tool will touch, not the path the model typed. Built-in tools
// implement it; plugin and WASM tools declare their path arguments in their
// schema instead ("x-policy": "path" or "paths", see docs/security.md).
type PathResolver interface {
	// ResolvePaths returns the resolution of args, which are valid against
	// the tool's schema. An error leaves the call as typed (the tool will
	// refuse it with its own error when it runs).
	ResolvePaths(args json.RawMessage) (PathResolution, error)
}

// PathResolution is what a PathResolver found.
type PathResolution struct {
	// Args are the arguments with every path argument replaced by the real
	// path (symbolic links followed inside the root, "." and ".." gone);
	// nil when nothing changed.
	Args json.RawMessage
	// Typed maps every changed argument to what the model typed.
	Typed map[string]string
	// Touched are further real paths the call will read or write that no
	// argument names (the files a search's glob selects).
	Touched []string
}

// TouchedPaths returns the paths the call will touch beyond its path
// arguments, as its tool's PathResolver reported them.
func (c *Call) TouchedPaths() []string { return slices.Clone(c.touched) }

// resolvePaths applies the tool's PathResolver to the call's arguments.
// Arguments it typed earlier (before a SetArgs) stay recorded.
func (c *Call) resolvePaths() {
	pr, ok := c.tool.(PathResolver)
	if !ok {
		return
	}
	res, err := pr.ResolvePaths(c.args)
	if err != nil {
		return
	}
	c.touched = res.Touched
	if res.Args == nil || c.entry == nil {
		return
	}
	v, err := c.entry.validate(res.Args)
	if err != nil {
		return
	}
	c.args, c.value = res.Args, v
	if len(res.Typed) > 0 {
		if c.origPaths == nil {
			c.origPaths = map[string]string{}
		}
		for k, typed := range res.Typed {
			if _, seen := c.origPaths[k]; !seen {
				c.origPaths[k] = typed
			}
		}
	}
}

// noteResolved records in d that the call's paths were resolved.
func (c *Call) noteResolved(d *Decision) {
	if len(c.origPaths) > 0 {
		d.Resolved = maps.Clone(c.origPaths)
	}
}
