package hooks

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/schema"
)

// docsConfig is the hooks: section of the example in docs/hooks.md.
func docsConfig(t *testing.T) *yaml.Node {
	t.Helper()
	data, err := os.ReadFile("../docs/hooks.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, "```yaml\nhooks:\n")
	if start < 0 {
		t.Fatal("docs/hooks.md has no ```yaml block starting with hooks:")
	}
	block := doc[start+len("```yaml\n"):]
	block = block[:strings.Index(block, "```")]
	var top struct {
		Hooks yaml.Node `yaml:"hooks"`
	}
	if err := yaml.Unmarshal([]byte(block), &top); err != nil {
		t.Fatal(err)
	}
	return &top.Hooks
}

// TestConfigSchemaFragment checks testdata/config-hooks.schema.json, the
// hooks property of schemas/config.schema.json: it accepts the documented
// example, refuses bad sections, and (once merged) is what the config
// schema holds.
func TestConfigSchemaFragment(t *testing.T) {
	frag, err := os.ReadFile("testdata/config-hooks.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	schema, err := schema.Compile("config-hooks.schema.json", frag)
	if err != nil {
		t.Fatal(err)
	}
	validate := func(node *yaml.Node) error {
		var v any
		if err := node.Decode(&v); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := decodeJSON(b)
		if err != nil {
			t.Fatal(err)
		}
		return schema.Validate(inst)
	}
	if err := validate(docsConfig(t)); err != nil {
		t.Fatalf("the documented example does not validate: %v", err)
	}
	for _, bad := range []string{
		`{rules: [{name: a, phase: before}]}`,
		`{rules: [{name: a, redact: [x], truncate: {head: 1, tail: 1}}]}`,
		`{rules: [{name: scrubber, redact: [x]}]}`,
		`{rules: [{name: a, redact: [x], fial: fail_open}]}`,
		`{rules: [{name: a, phase: before, command: {argv: [x], timeout: 5}}]}`,
		`{rules: [{name: a, phase: before, command: {argv: [x], env: ["A=b"]}}]}`,
		`{scrubber: {enable: true}}`,
		`{output_limit: {max_bytes: -1}}`,
	} {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(bad), &n); err != nil {
			t.Fatal(err)
		}
		if err := validate(n.Content[0]); err == nil {
			t.Errorf("the fragment accepts %s", bad)
		}
	}
	// Once the lead merged it, schemas/config.schema.json must hold it.
	data, err := os.ReadFile("../schemas/config.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfgSchema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(data, &cfgSchema); err != nil {
		t.Fatal(err)
	}
	var merged, want map[string]any
	if err := json.Unmarshal(cfgSchema.Properties["hooks"], &merged); err != nil {
		t.Fatal(err)
	}
	if _, ok := merged["properties"]; !ok {
		t.Skip("schemas/config.schema.json does not hold the hooks fragment yet")
	}
	if err := json.Unmarshal(frag, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(merged, want) {
		t.Fatal("the hooks property of schemas/config.schema.json differs from testdata/config-hooks.schema.json")
	}
}

// TestDocsConfigCompiles keeps the configuration example of docs/hooks.md
// honest: it must decode (no unknown field) and compile.
func TestDocsConfigCompiles(t *testing.T) {
	out, err := yaml.Marshal(docsConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parseConfig(t, string(out))
	if _, err := NewChain(cfg, Options{Dir: ".."}); err != nil {
		t.Fatalf("the example in docs/hooks.md does not compile: %v", err)
	}
	if len(cfg.Rules) != 5 || len(cfg.Scrubber.ExtraPatterns) != 2 {
		t.Fatalf("parsed %+v", cfg)
	}
}

// TestDocsRuleSnippetsCompile compiles every rule snippet of docs/hooks.md
// (```yaml blocks that are a list of rules).
func TestDocsRuleSnippetsCompile(t *testing.T) {
	data, err := os.ReadFile("../docs/hooks.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(data), "```yaml\n")[1:]
	n := 0
	for i, b := range blocks {
		b = b[:strings.Index(b, "```")]
		lines := strings.Split(strings.TrimRight(b, "\n"), "\n")
		indent := len(lines[0]) - len(strings.TrimLeft(lines[0], " "))
		if !strings.HasPrefix(strings.TrimSpace(lines[0]), "- name:") {
			continue
		}
		for k := range lines {
			if len(lines[k]) >= indent {
				lines[k] = lines[k][indent:]
			}
		}
		cfg := parseConfig(t, "rules:\n"+strings.Join(lines, "\n"))
		if _, err := NewChain(cfg, Options{Dir: ".."}); err != nil {
			t.Errorf("yaml block %d of docs/hooks.md: %v", i+1, err)
		}
		n++
	}
	if n < 5 {
		t.Fatalf("found %d rule snippets, expected more", n)
	}
	for _, src := range []string{
		`(args.timeout_seconds ?? 0) > 120`,
		`tool == "write_file" && args.path startsWith "deploy/"`,
		`tier != "read_only" && source startsWith "subprocess:"`,
		`"exec" in tags || tool in ["run_command", "git.git_push"]`,
		`is_error && result contains "panic:"`,
		`!approved`,
	} {
		if _, err := NewMatcher(src); err != nil {
			t.Errorf("documented matcher %s: %v", src, err)
		}
	}
}
