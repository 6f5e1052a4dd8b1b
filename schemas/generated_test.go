package schemas_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/tool"
)

var update = flag.Bool("update", false, "rewrite the parts of schemas/ and docs/ generated from the Go lists (make generate)")

// A closed set is a Go list (kernel.StopReasons, kernel.Outcomes,
// kernel.EventTypes, kernel.Effects, tool.Tiers); the schemas write it out
// where a JSON Schema must. Those values are generated: this file says
// where each set goes, TestGeneratedSchemas holds the files to it and
// `make generate` rewrites them. docs/architecture.md, "Closed sets".

type closedSet struct {
	name    string // as in messages: the Go function
	members []string
}

var (
	stopReasons = closedSet{"kernel.StopReasons", testutil.Strings(kernel.StopReasons())}
	outcomes    = closedSet{"kernel.Outcomes", testutil.Strings(kernel.Outcomes())}
	eventTypes  = closedSet{"kernel.EventTypes", kernel.EventTypes()}
	effects     = closedSet{"kernel.Effects", testutil.Strings(kernel.Effects())}
	tiers       = closedSet{"tool.Tiers", testutil.Strings(tool.Tiers())}
	hookPoints  = closedSet{"kernel.HookPoints", testutil.Strings(kernel.HookPoints())}
	closedSets  = []closedSet{stopReasons, outcomes, eventTypes, effects, tiers, hookPoints}
)

// generated is every value of schemas/ made from a closed set, by file.
func generated() map[string][]testutil.JSONEdit {
	dispatch := make([]testutil.Object, len(eventTypes.members))
	for i, ty := range eventTypes.members {
		dispatch[i] = testutil.Object{
			{Key: "if", Value: testutil.Object{{Key: "properties", Value: testutil.Object{{Key: "type", Value: testutil.Object{{Key: "const", Value: ty}}}}}}},
			{Key: "then", Value: testutil.Object{{Key: "$ref", Value: "#/$defs/" + ty}}},
		}
	}
	pointDispatch := make([]testutil.Object, len(hookPoints.members))
	for i, p := range hookPoints.members {
		pointDispatch[i] = testutil.Object{
			{Key: "if", Value: testutil.Object{{Key: "properties", Value: testutil.Object{{Key: "phase", Value: testutil.Object{{Key: "const", Value: p}}}}}}},
			{Key: "then", Value: testutil.Object{{Key: "$ref", Value: "#/$defs/" + p}}},
		}
	}
	quoted := make([]string, len(stopReasons.members))
	for i, r := range stopReasons.members {
		quoted[i] = regexp.QuoteMeta(r)
	}
	stopPattern := "^(" + strings.Join(quoted, "|") + "|" + regexp.QuoteMeta(string(kernel.BudgetStop(""))) + ".+)$"
	return map[string][]testutil.JSONEdit{
		"events.schema.json": {
			{Pointer: "/properties/type/enum", Value: eventTypes.members},
			{Pointer: "/allOf", Value: dispatch},
			{Pointer: "/$defs/outcome/enum", Value: outcomes.members},
			{Pointer: "/$defs/stopReason/pattern", Value: stopPattern},
			{Pointer: "/$defs/decision/properties/effect/enum", Value: effects.members},
			{Pointer: "/$defs/hookPoint/enum", Value: hookPoints.members},
		},
		"policy.schema.json": {
			{Pointer: "/properties/defaults/properties/tool_call/enum", Value: effects.members},
			{Pointer: "/properties/rules/items/properties/effect/enum", Value: effects.members},
			{Pointer: "/properties/tests/items/properties/expect/properties/decision/enum", Value: effects.members},
			{Pointer: "/$defs/input/properties/tool/properties/tier/enum", Value: tiers.members},
			// The input's run and turn sections, outcomes included, are
			// generated from the policy env (policy, TestGeneratedInputSchema).
		},
		"config.schema.json": {
			{Pointer: "/properties/hooks/properties/rules/items/properties/phase/enum", Value: hookPoints.members},
			{Pointer: "/properties/tools/properties/mcp/items/properties/tiers/additionalProperties/enum", Value: tiers.members},
			{Pointer: "/properties/tools/properties/mcp/items/properties/default_tier/enum", Value: tiers.members},
			{Pointer: "/properties/tools/properties/http/items/properties/tier/enum", Value: tiers.members},
			{Pointer: "/properties/tools/properties/command/items/properties/tier/enum", Value: tiers.members},
			{Pointer: "/properties/tools/properties/inline/items/properties/tier/enum", Value: tiers.members},
		},
		"policy-diff.schema.json": {
			{Pointer: "/$defs/effect/enum", Value: effects.members},
		},
		"hook-input.schema.json": {
			{Pointer: "/properties/phase/enum", Value: hookPoints.members},
			{Pointer: "/allOf", Value: pointDispatch},
			{Pointer: "/$defs/toolInfo/properties/tier/enum", Value: tiers.members},
			{Pointer: "/$defs/run_end/properties/calls/items/properties/outcome/enum", Value: outcomes.members},
		},
		"tool-manifest.schema.json": {
			{Pointer: "/$defs/tool/properties/tier/enum", Value: tiers.members},
		},
	}
}

// subsets are enums that name some members of a closed set on purpose.
var subsets = map[string]closedSet{
	"policy.schema.json /properties/defaults/properties/ask/enum": effects, // ask or deny: what an ask becomes
}

// elsewhere are enums of a closed set generated by another package's test.
var elsewhere = map[string]string{
	"policy.schema.json /$defs/input/properties/run/properties/calls/items/properties/outcome/enum":  "policy",
	"policy.schema.json /$defs/input/properties/turn/properties/calls/items/properties/outcome/enum": "policy",
}

// TestGeneratedSchemas holds every schema to the closed sets: each value
// generated() lists is what the Go list says (`make generate` rewrites it).
func TestGeneratedSchemas(t *testing.T) {
	for file, edits := range generated() {
		path := "../schemas/" + file
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, differ, err := testutil.RewriteJSON(data, edits)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		testutil.Generated(t, *update, path, want, differ)
	}
}

// TestEveryClosedSetEnumIsGenerated: an enum in any schema that names two
// or more members of a closed set is generated from it (or listed in
// subsets as a deliberate part of it, every member a real one). A schema
// that grows a new enum of tiers, outcomes, ... fails here until it is
// added to generated().
func TestEveryClosedSetEnumIsGenerated(t *testing.T) {
	known := map[string]bool{}
	for file, edits := range generated() {
		for _, e := range edits {
			known[file+" "+e.Pointer] = true
		}
	}
	files, err := filepath.Glob("*.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for ptr, enum := range enums(doc, "") {
			where := file + " " + ptr
			for _, set := range closedSets {
				n := 0
				for _, v := range enum {
					if slices.Contains(set.members, v) {
						n++
					}
				}
				if n < 2 {
					continue
				}
				if sub, ok := subsets[where]; ok && sub.name == set.name {
					for _, v := range enum {
						if !slices.Contains(set.members, v) {
							t.Errorf("%s: %q is not one of %s %v", where, v, set.name, set.members)
						}
					}
					continue
				}
				if !known[where] && elsewhere[where] == "" {
					t.Errorf("%s names %d members of %s: generate it from the list (add it to generated() in schemas/generated_test.go, then run `%s`) or list it in subsets", where, n, set.name, testutil.GenerateCommand)
				}
			}
		}
	}
}

// enums finds every "enum" of strings in a decoded schema, by JSON pointer.
func enums(v any, ptr string) map[string][]string {
	out := map[string][]string{}
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			p := ptr + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
			if list, ok := x.([]any); ok && k == "enum" {
				for _, s := range list {
					if s, ok := s.(string); ok {
						out[p] = append(out[p], s)
					}
				}
			}
			for q, e := range enums(x, p) {
				out[q] = e
			}
		}
	case []any:
		for i, x := range v {
			for q, e := range enums(x, fmt.Sprintf("%s/%d", ptr, i)) {
				out[q] = e
			}
		}
	}
	return out
}

// TestEventSchemaDefinesEveryEventType: every type of kernel.EventTypes has
// its $defs entry in schemas/events.schema.json, with "type" const to its
// name and a description, and the schema defines no event the kernel does
// not have. (kernel's TestEveryEventHasASchema holds each entry's fields to
// the Go type.)
func TestEventSchemaDefinesEveryEventType(t *testing.T) {
	defs := eventDefs(t)
	for _, ty := range eventTypes.members {
		d, ok := defs[ty]
		if !ok {
			t.Errorf("schemas/events.schema.json has no $defs/%s: write it (its fields are the Go type's JSON fields; see the other events)", ty)
			continue
		}
		if d.Properties["type"].Const != ty || d.Description == "" {
			t.Errorf("$defs/%s: type const %q, description %q", ty, d.Properties["type"].Const, d.Description)
		}
	}
	for name, d := range defs {
		if d.Properties["type"].Const != "" && !slices.Contains(eventTypes.members, name) {
			t.Errorf("schemas/events.schema.json defines event %s, which is not in %s", name, eventTypes.name)
		}
	}
}

type eventDef struct {
	Description string   `json:"description"`
	Required    []string `json:"required"`
	Properties  map[string]struct {
		Const string `json:"const"`
	} `json:"properties"`
}

func eventDefs(t *testing.T) map[string]eventDef {
	t.Helper()
	data, err := os.ReadFile("events.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Defs map[string]eventDef `json:"$defs"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Defs
}

// The events table of docs/architecture.md is generated from the list and
// the schema's descriptions, between these markers.
const (
	eventsTableBegin = "<!-- events table: generated by `make generate`"
	eventsTableEnd   = "<!-- end of events table -->"
)

// TestGeneratedEventsTable holds the events table of docs/architecture.md
// to kernel.EventTypes and schemas/events.schema.json: one row an event,
// in order, with its fields (required ones first) and its description.
func TestGeneratedEventsTable(t *testing.T) {
	defs := eventDefs(t)
	var b strings.Builder
	b.WriteString("| event | fields | what it says |\n|---|---|---|\n")
	for _, ty := range eventTypes.members {
		d := defs[ty]
		var fields []string
		for _, f := range d.Required {
			if f != "type" {
				fields = append(fields, "`"+f+"`")
			}
		}
		var optional []string
		for f := range d.Properties {
			if f != "type" && !slices.Contains(d.Required, f) {
				optional = append(optional, "`"+f+"`")
			}
		}
		sort.Strings(optional)
		if len(optional) > 0 {
			fields = append(fields, "("+strings.Join(optional, ", ")+")")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", ty, strings.Join(fields, ", "), strings.ReplaceAll(d.Description, "|", `\|`))
	}
	const path = "../docs/architecture.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := testutil.ReplaceBetween(string(data), eventsTableBegin, eventsTableEnd, b.String())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	testutil.Generated(t, *update, path, []byte(want), []string{"the events table"})
}
