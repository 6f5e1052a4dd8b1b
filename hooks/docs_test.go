package hooks

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/schema"
	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/tool"
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

// TestConfigSchemaFragment checks the hooks property of
// schemas/config.schema.json (with the schema's $defs it refers to): it
// accepts the documented example and refuses bad sections.
func TestConfigSchemaFragment(t *testing.T) {
	data, err := os.ReadFile("../schemas/config.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var root struct {
		Defs       json.RawMessage            `json:"$defs"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	var hooksProp map[string]json.RawMessage
	if err := json.Unmarshal(root.Properties["hooks"], &hooksProp); err != nil {
		t.Fatal(err)
	}
	hooksProp["$defs"] = root.Defs
	frag, err := json.Marshal(hooksProp)
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

// docTable is the only table of a section of docs/hooks.md.
func docTable(t *testing.T, heading string) [][]string {
	t.Helper()
	tables := testutil.Tables(testutil.Section(testutil.ReadFile(t, "../docs/hooks.md"), heading))
	if len(tables) == 0 {
		t.Fatalf("docs/hooks.md, %q: no table", heading)
	}
	return tables[0]
}

// docType is how docs/hooks.md writes the type of an Env field.
func docType(rt reflect.Type) string {
	switch rt.Kind() {
	case reflect.String:
		return "string"
	case reflect.Int:
		return "int"
	case reflect.Bool:
		return "bool"
	case reflect.Map:
		return "map"
	case reflect.Struct:
		return "object"
	case reflect.Slice:
		return "list of " + docType(rt.Elem()) + "s"
	}
	return rt.String()
}

// TestDocsEnvTable holds the table of docs/hooks.md, "Matchers: the
// environment", to Env: one row a field, named by its expr tag, in the
// struct's order, with its type; and the tier row names every tier.
func TestDocsEnvTable(t *testing.T) {
	var want [][2]string
	rt := reflect.TypeFor[Env]()
	for i := range rt.NumField() {
		f := rt.Field(i)
		want = append(want, [2]string{f.Tag.Get("expr"), docType(f.Type)})
	}
	var got [][2]string
	for _, row := range docTable(t, "## Matchers: the environment")[1:] {
		name := testutil.Code(row[0])
		if len(name) != 1 || len(row) < 3 {
			t.Errorf("docs/hooks.md env table: row %q: want `name` | type | value", row)
			continue
		}
		got = append(got, [2]string{name[0], row[1]})
		if name[0] == "tier" && !slices.Equal(testutil.Code(row[2]), testutil.Strings(tool.Tiers())) {
			t.Errorf("docs/hooks.md env table: the tier row names %v, the tiers are %v (tool.Tiers)", testutil.Code(row[2]), testutil.Strings(tool.Tiers()))
		}
	}
	pairs := func(xs [][2]string) []string {
		var out []string
		for _, x := range xs {
			out = append(out, x[0]+" ("+x[1]+")")
		}
		return out
	}
	if d := testutil.ListDiff(pairs(got), pairs(want)); d != "" {
		t.Errorf("docs/hooks.md, \"Matchers: the environment\", against hooks.Env's fields (expr tag and type): %s; a field hooks see is one row of that table, in the struct's order", d)
	}
}

// TestDocsEventsTable holds the events table of docs/hooks.md to the
// hook.* events of kernel.EventTypes, each with the fields
// schemas/events.schema.json requires of it, in its order.
func TestDocsEventsTable(t *testing.T) {
	data, err := os.ReadFile("../schemas/events.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Defs map[string]struct {
			Required []string `json:"required"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	for _, ty := range kernel.EventTypes() {
		if strings.HasPrefix(ty, "hook.") {
			want[ty] = slices.DeleteFunc(slices.Clone(doc.Defs[ty].Required), func(f string) bool { return f == "type" })
		}
	}
	got := map[string][]string{}
	for _, row := range docTable(t, "## Events")[1:] {
		name := testutil.Code(row[0])
		if len(name) != 1 || len(row) < 3 {
			t.Errorf("docs/hooks.md events table: row %q: want `event` | fields | when", row)
			continue
		}
		got[name[0]] = testutil.Code(row[1])
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("docs/hooks.md, \"Events\" has (event: fields)\n  %v\nthe hook.* events of kernel.EventTypes are\n  %v", got, want)
	}
}

// TestDocsCommandInput: the input example of docs/hooks.md is valid against
// schemas/hook-input.schema.json and has every field the kernel always
// writes in the before phase, in the kernel's order; the schema's
// properties are Input's JSON fields, required unless omitempty.
func TestDocsCommandInput(t *testing.T) {
	sec := testutil.Section(testutil.ReadFile(t, "../docs/hooks.md"), "### The input (`schemas/hook-input.schema.json`)")
	_, block, ok := strings.Cut(sec, "```json\n")
	if !ok {
		t.Fatal("docs/hooks.md, \"The input\": no ```json block")
	}
	block = strings.ReplaceAll(block[:strings.Index(block, "```")], "\n", "")
	inst, err := decodeJSON([]byte(block))
	if err != nil {
		t.Fatalf("the input example is not JSON: %v\n%s", err, block)
	}
	s, err := inputSchema()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(inst); err != nil {
		t.Errorf("the input example of docs/hooks.md does not match schemas/hook-input.schema.json: %v", err)
	}
	var fields, required []string
	rt := reflect.TypeFor[Input]()
	for i := range rt.NumField() {
		name, opts, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		fields = append(fields, name)
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	dec := json.NewDecoder(strings.NewReader(block))
	var order []string
	dec.Token() // {
	for dec.More() {
		k, _ := dec.Token()
		order = append(order, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(order, required) {
		t.Errorf("the input example of docs/hooks.md has the fields %v; the kernel writes %v", order, required)
	}
	defs := inputDefs(t)
	for _, phase := range []string{"before", "after"} {
		sch := defs[phase]
		want, req := fields, required
		if phase == "before" { // no result, no decision
			want = slices.DeleteFunc(slices.Clone(fields), func(f string) bool { return f == "result" || f == "decision" })
		} else {
			req = append(slices.Clone(required), "result")
		}
		props := slices.Sorted(maps.Keys(sch.Properties))
		if !slices.Equal(props, slices.Sorted(slices.Values(want))) || !slices.Equal(sch.Required, req) {
			t.Errorf("schemas/hook-input.schema.json#/$defs/%s has the properties %v, requiring %v; hooks.Input writes %v there, always %v", phase, props, sch.Required, want, req)
		}
	}
}

// schemaDef is an object schema's properties and required fields.
type schemaDef struct {
	Required   []string                   `json:"required"`
	Properties map[string]json.RawMessage `json:"properties"`
}

// inputDefs are the $defs of schemas/hook-input.schema.json.
func inputDefs(t *testing.T) map[string]schemaDef {
	t.Helper()
	raw, err := os.ReadFile("../schemas/hook-input.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var sch struct {
		Defs map[string]schemaDef `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &sch); err != nil {
		t.Fatal(err)
	}
	return sch.Defs
}
