package hooks

import (
	"fmt"
)

// Hooks a subprocess plugin serves (kind plugin) are resolved through
// Options.Plugins.

func compilePluginTool(h *hook, r Rule, opts Options, field string) []error {
	return []error{hookError(r.Name, field, fmt.Errorf("plugin hooks are not available yet"))}
}

func compilePluginPoint(ph *PointHook, r Rule, opts Options, field string) []error {
	return []error{hookError(r.Name, field, fmt.Errorf("plugin hooks are not available yet"))}
}
