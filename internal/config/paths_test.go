package config_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/schemas"
)

// TestPathFieldsOfConfigSchema pins the path fields kernel.yaml has: they
// come from the schema's "x-path" annotations, and every one listed here
// was resolved against the config file's directory before the annotation
// existed (removing an annotation fails this test).
func TestPathFieldsOfConfigSchema(t *testing.T) {
	b, err := schemas.FS.ReadFile("config.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := config.PathFields(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"agents.*.model.catalog", "agents.*.model.script",
		"agents.*.policy", "agents.*.system_prompt_file",
		"hooks.rules.*.command.sandbox.fs.*.path",
		"model.catalog", "model.script",
		"policy.decision_log", "policy.file",
		"security.allow_writable.*",
		"store.dir",
		"tools.builtin.command_sandbox.fs.*.path",
		"tools.command.*.dir",
		"tools.command.*.sandbox.fs.*.path",
		"tools.http.*.egress.ca_file",
		"tools.mcp.*.grant.fs.*.path",
		"tools.plugins.*.dir", "tools.plugins.*.path", "tools.plugins.*.sandbox.fs.*.path",
		"tools.wasm.*.grants.fs.*.host", "tools.wasm.*.path",
		"workspace",
	}
	if !slices.Equal(got, want) {
		t.Errorf("path fields:\n got %q\nwant %q", got, want)
	}
}

func TestPathFieldsFollowsRefsAndCombinators(t *testing.T) {
	schema := `{
	  "$defs": {
	    "node": {"type": "object", "properties": {"file": {"type": "string", "x-path": true}, "child": {"$ref": "#/$defs/node"}}}
	  },
	  "properties": {
	    "tree": {"$ref": "#/$defs/node"},
	    "either": {"oneOf": [{"type": "string", "x-path": true}, {"type": "null"}]},
	    "byName": {"additionalProperties": {"properties": {"dir": {"x-path": true}}}},
	    "plain": {"type": "string"}
	  }
	}`
	got, err := config.PathFields([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	// A recursive $ref is followed once: "tree.child.file" would need an
	// unbounded list, so recursive path fields are not supported.
	want := []string{"byName.*.dir", "either", "tree.file"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := config.PathFields([]byte(`{"properties": {"a": {"$ref": "#/$defs/missing"}}}`)); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a dangling $ref: %v", err)
	}
}

func TestResolvePaths(t *testing.T) {
	var doc yaml.Node
	src := "workspace: ws\nplain: rel\ntools:\n  plugins:\n    - {path: bin/p, dir: /abs}\n    - {path: ''}\n"
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	config.ResolvePaths(&doc, []string{"workspace", "tools.plugins.*.path", "tools.plugins.*.dir"}, "/etc/k")
	var got map[string]any
	if err := doc.Decode(&got); err != nil {
		t.Fatal(err)
	}
	plugins := got["tools"].(map[string]any)["plugins"].([]any)
	checks := map[string]any{
		"workspace":    got["workspace"],
		"plain":        got["plain"],
		"plugins[0].p": plugins[0].(map[string]any)["path"],
		"plugins[0].d": plugins[0].(map[string]any)["dir"],
		"plugins[1].p": plugins[1].(map[string]any)["path"],
	}
	want := map[string]any{
		"workspace":    filepath.Join("/etc/k", "ws"),
		"plain":        "rel", // not a path field
		"plugins[0].p": filepath.Join("/etc/k", "bin/p"),
		"plugins[0].d": "/abs",
		"plugins[1].p": "", // empty stays empty: "required" is the schema's job
	}
	for k, w := range want {
		if checks[k] != w {
			t.Errorf("%s = %v, want %v", k, checks[k], w)
		}
	}
}
