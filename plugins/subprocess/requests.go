package subprocess

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentkernel/agentkernel/sandbox"
)

// RequestsSuffix names a plugin's capability requests: the file
// "<binary>.sandbox.yaml" next to the configured binary, written by the
// plugin's author in the sandbox manifest vocabulary (fs, net, env,
// memory_mb, cpu, timeout, max_procs, max_output_bytes, ...). A relative
// fs path is relative to the directory holding the file (where a plugin
// ships its data); every path, requested and granted, is compared with its
// symlinks resolved, so a link inside a granted directory cannot reach
// past it. A plugin with such a file gets what it requests ∩ what its
// config entry grants (sandbox: and env:); one without gets what the
// config grants. The file is not pinned: it can only narrow the grant.
const RequestsSuffix = ".sandbox.yaml"

// EffectiveConfig returns cfg with its sandbox grant and env list cut to
// the plugin's requests when it declares any, and one warning per request
// the config does not grant (naming the plugin and the request).
func EffectiveConfig(cfg PluginConfig) (PluginConfig, []string, error) {
	path := cfg.Path + RequestsSuffix
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return cfg, nil, nil
	}
	if err != nil {
		return cfg, nil, pluginError(cfg.Name, "path", fmt.Errorf("read the plugin's requests: %w", err))
	}
	req, err := sandbox.DecodeYAMLRelative(b, filepath.Dir(path))
	if err != nil {
		return cfg, nil, pluginError(cfg.Name, "path", fmt.Errorf("%s: %w", path, err))
	}
	granted := cfg.Sandbox
	granted.Env = cfg.Env
	granted.FS = resolveLinks(granted.FS)
	req.FS = resolveLinks(req.FS)
	eff, cut := granted.Intersect(req)
	var warn []string
	for _, w := range cut {
		warn = append(warn, fmt.Sprintf("plugin %s: %s (%s)", cfg.Name, w, path))
	}
	cfg.Env = slices.Clone(eff.Env)
	eff.Env = nil
	cfg.Sandbox = eff
	return cfg, warn, nil
}

// resolveLinks returns rules with each existing path's symlinks resolved:
// Landlock follows them when it opens a rule's path, so a request must be
// compared where it really leads.
func resolveLinks(rules []sandbox.FSRule) []sandbox.FSRule {
	out := slices.Clone(rules)
	for i, r := range out {
		if p, err := filepath.EvalSymlinks(r.Path); err == nil {
			out[i].Path = p
		}
	}
	return out
}
