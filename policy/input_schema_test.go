package policy_test

import (
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/policy"
)

// The session and run sections of a test input (and run's deprecated name
// turn) decode straight into kernel.State through inputFields (env.go).
// schemas/policy.schema.json describes them for editors and validators;
// its properties are generated from inputFields by this test (`make
// generate`), so a field added to the env and to inputFields reaches the
// schema without writing it there (docs/architecture.md, "Adding a field
// policy and hooks can see").

// schemaFor is the JSON Schema of an input key that sets a value of Go
// type rt.
func schemaFor(t *testing.T, key string, rt reflect.Type) testutil.Object {
	t.Helper()
	switch {
	case rt == reflect.TypeFor[time.Duration]():
		return testutil.Object{{Key: "type", Value: "string"}, {Key: "description", Value: "A Go duration, e.g. 90s."}}
	case rt == reflect.TypeFor[kernel.Outcome]():
		return testutil.Object{{Key: "enum", Value: kernel.Outcomes()}}
	case rt == reflect.TypeFor[kernel.CallOutcome]():
		return testutil.Object{
			{Key: "type", Value: "object"}, {Key: "additionalProperties", Value: false}, {Key: "required", Value: []string{"tool"}},
			{Key: "properties", Value: yamlProperties(t, rt)},
		}
	case rt == reflect.TypeFor[kernel.PointVerdict]():
		return testutil.Object{{Key: "type", Value: "object"}, {Key: "additionalProperties", Value: false}, {Key: "properties", Value: yamlProperties(t, rt)}}
	case rt.Kind() == reflect.Bool:
		return testutil.Object{{Key: "type", Value: "boolean"}}
	}
	switch rt.Kind() {
	case reflect.String:
		return testutil.Object{{Key: "type", Value: "string"}}
	case reflect.Int, reflect.Int64:
		return testutil.Object{{Key: "type", Value: "integer"}, {Key: "minimum", Value: 0}}
	case reflect.Float64:
		return testutil.Object{{Key: "type", Value: "number"}, {Key: "minimum", Value: 0}}
	case reflect.Map:
		return testutil.Object{{Key: "type", Value: "object"}, {Key: "additionalProperties", Value: schemaFor(t, key, rt.Elem())}}
	case reflect.Slice:
		return testutil.Object{{Key: "type", Value: "array"}, {Key: "items", Value: schemaFor(t, key, rt.Elem())}}
	}
	t.Fatalf("input key %s sets a %v: say what JSON Schema it has in schemaFor (policy/input_schema_test.go)", key, rt)
	return nil
}

// yamlProperties is the properties of a struct decoded by its yaml tags.
func yamlProperties(t *testing.T, rt reflect.Type) testutil.Object {
	var props testutil.Object
	for i := range rt.NumField() {
		f := rt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		props = append(props, testutil.Member{Key: name, Value: schemaFor(t, name, f.Type)})
	}
	return props
}

// envOrder is the order of an env section's fields (their expr tags), the
// order the schema lists the keys in; keys the env does not have go last.
func envOrder(rt reflect.Type, keys []string) []string {
	pos := map[string]int{}
	for i := range rt.NumField() {
		pos[rt.Field(i).Tag.Get("expr")] = i
	}
	sort.SliceStable(keys, func(i, j int) bool {
		pi, iok := pos[keys[i]]
		pj, jok := pos[keys[j]]
		if iok != jok {
			return iok
		}
		if !iok {
			return keys[i] < keys[j]
		}
		return pi < pj
	})
	return keys
}

func sectionSchema(t *testing.T, fields map[string]reflect.Type, env reflect.Type, rename map[string]string) testutil.Object {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	keys = envOrder(env, keys)
	var props testutil.Object
	for _, k := range keys {
		name := k
		for old, now := range rename {
			if now == k {
				name = old
			}
		}
		props = append(props, testutil.Member{Key: name, Value: schemaFor(t, name, fields[k])})
	}
	return props
}

// TestGeneratedInputSchema holds the session, run and turn sections of
// schemas/policy.schema.json's input to what a test input can set.
func TestGeneratedInputSchema(t *testing.T) {
	session, run, renamed := policy.InputSections()
	edits := []testutil.JSONEdit{
		{Pointer: "/$defs/input/properties/session/properties", Value: sectionSchema(t, session, reflect.TypeFor[policy.SessionEnv](), nil)},
		{Pointer: "/$defs/input/properties/run/properties", Value: sectionSchema(t, run, reflect.TypeFor[policy.RunEnv](), nil)},
		{Pointer: "/$defs/input/properties/turn/properties", Value: sectionSchema(t, run, reflect.TypeFor[policy.RunEnv](), renamed)},
		{Pointer: "/$defs/input/properties/agent/properties", Value: sectionSchema(t, policy.InputAgentSection(), reflect.TypeFor[policy.AgentEnv](), nil)},
		{Pointer: "/$defs/input/properties/hooks", Value: testutil.Object{
			{Key: "type", Value: "object"}, {Key: "additionalProperties", Value: false},
			{Key: "description", Value: "The lifecycle hook points' verdicts (kernel.HookVerdicts): hooks.<point> in the env."},
			{Key: "properties", Value: yamlProperties(t, reflect.TypeFor[kernel.HookVerdicts]())}}},
	}
	const path = "../schemas/policy.schema.json"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, differ, err := testutil.RewriteJSON(data, edits)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range differ {
		differ[i] = strings.TrimPrefix(d, "/$defs/")
	}
	testutil.Generated(t, *update, path, want, differ)
}
