//go:build !agentkernel_launcher

package sandbox

import (
	"bytes"
	"fmt"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/config"
)

// What of a Grant only the kernel needs: YAML, and the Duration of
// internal/config. The dedicated launcher (cmd/sandbox-init, built with
// the agentkernel_launcher tag) never decodes a grant, and leaving yaml.v3
// and internal/config out of it spares every sandbox their package
// initialisers (grant_launcher.go; RATIONALE.md, "The sandbox's cold
// start, fourth round (issue 45)").

// Duration is a time.Duration written as a Go duration string ("30s",
// "1m30s") in YAML and JSON: the one type of internal/config.
type Duration = config.Duration

// UnmarshalYAML reads "none" or a mapping with connect and bind.
func (n *Net) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind == yaml.ScalarNode {
		if node.Value == "none" {
			*n = Net{}
			return nil
		}
		return fmt.Errorf("line %d: net: want \"none\" or a mapping with connect and bind port lists, got %q", node.Line, node.Value)
	}
	var raw map[string]yaml.Node
	if err := node.Decode(&raw); err != nil {
		return fmt.Errorf("line %d: net: %w", node.Line, err)
	}
	for k, v := range raw {
		ports, err := decodePorts(k, func(dst any) error { return v.Decode(dst) })
		if err != nil {
			return fmt.Errorf("line %d: net.%s: %w", v.Line, k, err)
		}
		if k == "connect" {
			n.Connect = ports
		} else {
			n.Bind = ports
		}
	}
	return nil
}

// DecodeYAML decodes a grant from YAML, refusing unknown fields, and
// validates it. Errors name the field and line.
func DecodeYAML(b []byte) (Grant, error) {
	var g Grant
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&g); err != nil {
		return Grant{}, fmt.Errorf("sandbox grant: %w", err)
	}
	return g, g.Validate()
}

// DecodeYAMLRelative is DecodeYAML for a manifest whose relative fs paths
// are relative to base (the directory of the file it was read from).
func DecodeYAMLRelative(b []byte, base string) (Grant, error) {
	var g Grant
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&g); err != nil {
		return Grant{}, fmt.Errorf("sandbox grant: %w", err)
	}
	for i, r := range g.FS {
		if r.Path != "" && !filepath.IsAbs(r.Path) {
			g.FS[i].Path = filepath.Join(base, r.Path)
		}
	}
	return g, g.Validate()
}
