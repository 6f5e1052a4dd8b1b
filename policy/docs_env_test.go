package policy_test

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/policy"
	"github.com/agentkernel/agentkernel/tool"
)

// docRows reads a table of docs/policy.md: for each row, the names of its
// first cell (a name written `.x` continues the row's first name:
// "`session.id`, `.model`") and the row's cells.
func docRows(t *testing.T, table [][]string) (names [][]string, rows [][]string) {
	t.Helper()
	for _, row := range table[1:] {
		var ns []string
		prefix := ""
		for _, c := range testutil.Code(row[0]) {
			if strings.HasPrefix(c, ".") {
				c = prefix + c
			} else if i := strings.IndexByte(c, '.'); i > 0 {
				prefix = c[:i]
			}
			ns = append(ns, c)
		}
		names, rows = append(names, ns), append(rows, row)
	}
	return names, rows
}

// envType is how docs/policy.md writes the type of an env field.
func envType(rt reflect.Type) string {
	switch rt {
	case reflect.TypeFor[time.Duration]():
		return "duration"
	case reflect.TypeFor[time.Time]():
		return "time"
	}
	switch rt.Kind() {
	case reflect.String:
		return "string"
	case reflect.Int:
		return "int"
	case reflect.Float64:
		return "float"
	case reflect.Bool:
		return "bool"
	case reflect.Struct:
		return "object"
	case reflect.Map:
		if rt.Elem().Kind() == reflect.Interface {
			return "map"
		}
		return "map " + envType(rt.Key()) + " → " + envType(rt.Elem())
	case reflect.Slice:
		if rt.Elem().Kind() == reflect.Struct {
			var tags []string
			for i := range rt.Elem().NumField() {
				tags = append(tags, rt.Elem().Field(i).Tag.Get("expr"))
			}
			return "list of `{" + strings.Join(tags, ", ") + "}`"
		}
		return "list of " + envType(rt.Elem())
	}
	return rt.String()
}

// envFields flattens policy.Env into its names (session.id, ..., now), in
// the struct's order, with their types; the deprecated turn section is
// documented in its own table.
func envFields() (names []string, types map[string]reflect.Type) {
	types = map[string]reflect.Type{}
	rt := reflect.TypeFor[policy.Env]()
	for i := range rt.NumField() {
		f := rt.Field(i)
		if !f.IsExported() || f.Type == reflect.TypeFor[policy.TurnEnv]() {
			continue // expr sees only exported fields
		}
		tag := f.Tag.Get("expr")
		if f.Type.Kind() != reflect.Struct || f.Type == reflect.TypeFor[time.Time]() {
			names, types[tag] = append(names, tag), f.Type
			continue
		}
		for j := range f.Type.NumField() {
			sub := f.Type.Field(j)
			name := tag + "." + sub.Tag.Get("expr")
			names, types[name] = append(names, name), sub.Type
		}
	}
	return names, types
}

// TestDocsEnvTable holds the table of docs/policy.md, "The environment", to
// policy.Env: every field (by its expr tag, in the struct's order) is
// named once, with its type; only v.<name> and budget.<name>, which the
// compiler resolves, are there besides. The run.calls row names every
// outcome and the tool.tier row every tier.
func TestDocsEnvTable(t *testing.T) {
	tables := testutil.Tables(testutil.Section(testutil.ReadFile(t, "../docs/policy.md"), "## The environment"))
	if len(tables) == 0 {
		t.Fatal(`docs/policy.md, "The environment": no table`)
	}
	want, types := envFields()
	names, rows := docRows(t, tables[0])
	var got []string
	for i, ns := range names {
		var rowTypes []string
		for _, n := range ns {
			if n == "v.<name>" || n == "budget.<name>" {
				continue
			}
			got = append(got, n)
			if rt, ok := types[n]; ok && !slices.Contains(rowTypes, envType(rt)) {
				rowTypes = append(rowTypes, envType(rt))
			}
		}
		if len(rowTypes) > 0 && rows[i][1] != strings.Join(rowTypes, ", ") {
			t.Errorf("docs/policy.md env table, row %v: type %q, the env's is %q", ns, rows[i][1], strings.Join(rowTypes, ", "))
		}
		code := testutil.Code(rows[i][2])
		switch {
		case slices.Contains(ns, "run.calls"):
			for _, o := range testutil.Strings(kernel.Outcomes()) {
				if !slices.Contains(code, o) {
					t.Errorf("docs/policy.md env table, run.calls: outcome %s is not named (kernel.Outcomes)", o)
				}
			}
		case slices.Contains(ns, "tool.tier"):
			if !slices.Equal(code, testutil.Strings(tool.Tiers())) {
				t.Errorf("docs/policy.md env table, tool.tier names %v; the tiers are %v (tool.Tiers)", code, tool.Tiers())
			}
		}
	}
	if d := testutil.ListDiff(got, want); d != "" {
		t.Errorf("docs/policy.md, \"The environment\", against policy.Env's fields: %s; an env field is one row of that table (or one name of a row), in the struct's order", d)
	}
}

// TestDocsTestInputTable holds the input table of docs/policy.md, "Tests",
// to what a test input can set: the session and run keys (inputFields),
// call, context, tool, tools, phase and now.
func TestDocsTestInputTable(t *testing.T) {
	tables := testutil.Tables(testutil.Section(testutil.ReadFile(t, "../docs/policy.md"), "## Tests"))
	if len(tables) == 0 || !slices.Equal(tables[0][0], []string{"Field", "Default", "Meaning"}) {
		t.Fatal(`docs/policy.md, "Tests": the first table is not the input table (Field | Default | Meaning)`)
	}
	session, run, _ := policy.InputSections()
	want := []string{"tools", "phase", "now"}
	for k := range session {
		want = append(want, "session."+k)
	}
	for k := range run {
		want = append(want, "run."+k)
	}
	for k := range policy.InputAgentSection() {
		want = append(want, "agent."+k)
	}
	for _, sec := range []struct {
		name string
		rt   reflect.Type
	}{{"call", reflect.TypeFor[policy.CallInput]()}, {"context", reflect.TypeFor[kernel.ContextUse]()}, {"hooks", reflect.TypeFor[kernel.HookVerdicts]()}, {"memory", reflect.TypeFor[policy.MemoryRetrieval]()}} {
		for i := range sec.rt.NumField() {
			want = append(want, sec.name+"."+sec.rt.Field(i).Tag.Get("yaml"))
		}
	}
	raw, err := os.ReadFile("../schemas/policy.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var toolSec map[string]json.RawMessage
	if err := testutil.JSONAt(raw, "/$defs/input/properties/tool/properties", &toolSec); err != nil {
		t.Fatal(err)
	}
	for k := range toolSec {
		want = append(want, "tool."+k)
	}
	names, _ := docRows(t, tables[0])
	got := map[string]bool{}
	for _, ns := range names {
		for _, n := range ns {
			if got[n] {
				t.Errorf("docs/policy.md input table names %s twice", n)
			}
			got[n] = true
		}
	}
	slices.Sort(want)
	if d := testutil.ListDiff(slices.Sorted(maps.Keys(got)), want); d != "" {
		t.Errorf("docs/policy.md, \"Tests\": the input table, against what a test input can set: %s; an input key is one row of that table (or one name of a row)", d)
	}
}

// TestDocsNameTheEffects: the places of docs/policy.md that list the
// effects list exactly kernel.Effects.
func TestDocsNameTheEffects(t *testing.T) {
	doc := testutil.ReadFile(t, "../docs/policy.md")
	want := slices.Sorted(slices.Values(testutil.Strings(kernel.Effects())))
	for _, c := range []struct{ section, row string }{
		{"## The file", "`defaults.tool_call`"},
		{"## Tests", "`decision`"},
	} {
		found := false
		for _, table := range testutil.Tables(testutil.Section(doc, c.section)) {
			for _, row := range table {
				if row[0] != c.row {
					continue
				}
				found = true
				got := slices.Sorted(slices.Values(testutil.Code(strings.Join(row[1:], " "))))
				if !slices.Equal(got, want) {
					t.Errorf("docs/policy.md, %q, row %s names %v; the effects are %v (kernel.Effects)", c.section, c.row, got, want)
				}
			}
		}
		if !found {
			t.Errorf("docs/policy.md, %q: no row %s", c.section, c.row)
		}
	}
}
