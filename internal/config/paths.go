package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/config/names"
)

// PathFields lists the fields of a JSON Schema annotated "x-path": true:
// the strings that name files or directories and are resolved against the
// directory of the file that sets them. Each is a dotted path where *
// stands for any key of a mapping or any item of a list
// ("tools.plugins.*.path"). It follows properties, items,
// additionalProperties, patternProperties, allOf/anyOf/oneOf, if/then/else
// and local "$ref"s ("#/$defs/..."); a $ref already being followed on the
// way down is not followed again, so a recursive schema's deeper levels are
// not resolved.
func PathFields(schema []byte) ([]string, error) {
	var root map[string]any
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil, fmt.Errorf("read the schema: %w", err)
	}
	var out []string
	var walk func(n any, path []string, refs []string) error
	walk = func(n any, path []string, refs []string) error {
		m, ok := n.(map[string]any)
		if !ok {
			return nil
		}
		if m["x-path"] == true {
			out = append(out, strings.Join(path, "."))
		}
		if ref, ok := m["$ref"].(string); ok {
			if slices.Contains(refs, ref) {
				return nil // recursive: paths below were found the first time
			}
			target, err := names.ResolveRef(root, ref)
			if err != nil {
				return err
			}
			if err := walk(target, path, append(refs, ref)); err != nil {
				return err
			}
		}
		if props, ok := m["properties"].(map[string]any); ok {
			for _, k := range SortedKeys(props) {
				if err := walk(props[k], append(slices.Clip(path), k), refs); err != nil {
					return err
				}
			}
		}
		for _, k := range []string{"items", "additionalProperties"} {
			if err := walk(m[k], append(slices.Clip(path), "*"), refs); err != nil {
				return err
			}
		}
		if pp, ok := m["patternProperties"].(map[string]any); ok {
			for _, k := range SortedKeys(pp) {
				if err := walk(pp[k], append(slices.Clip(path), "*"), refs); err != nil {
					return err
				}
			}
		}
		for _, k := range []string{"allOf", "anyOf", "oneOf", "prefixItems"} {
			list, _ := m[k].([]any)
			for _, sub := range list {
				p := path
				if k == "prefixItems" {
					p = append(slices.Clip(path), "*")
				}
				if err := walk(sub, p, refs); err != nil {
					return err
				}
			}
		}
		for _, k := range []string{"if", "then", "else"} {
			if err := walk(m[k], path, refs); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root, nil, nil); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ResolvePaths makes the values of fields (PathFields) in the YAML
// document doc absolute against dir. Empty values and other kinds of node
// are left alone (the schema reports them).
func ResolvePaths(doc *yaml.Node, fields []string, dir string) {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	for _, f := range fields {
		WalkPath(doc, strings.Split(f, "."), func(n *yaml.Node) {
			if n.Kind == yaml.ScalarNode && n.Value != "" {
				n.Value = ResolvePath(dir, n.Value)
			}
		})
	}
}

// WalkPath calls fn for every node of n at the dotted path parts, where
// "*" matches any key of a mapping or any item of a list.
func WalkPath(n *yaml.Node, parts []string, fn func(*yaml.Node)) {
	if len(parts) == 0 {
		fn(n)
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if parts[0] == "*" || n.Content[i].Value == parts[0] {
				WalkPath(n.Content[i+1], parts[1:], fn)
			}
		}
	case yaml.SequenceNode:
		if parts[0] == "*" {
			for _, c := range n.Content {
				WalkPath(c, parts[1:], fn)
			}
		}
	}
}

// ResolvePath makes p absolute against dir ("~/" is the home directory).
func ResolvePath(dir, p string) string {
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[2:])
		}
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}
