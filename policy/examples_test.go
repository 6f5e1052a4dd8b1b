package policy_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/schema"
	"github.com/agentkernel/agentkernel/policy"
)

// TestExamplePolicies: every example loads against the built-in tools (so
// lint checks the tool names), passes its tests, and has at least 8.
func TestExamplePolicies(t *testing.T) {
	for _, file := range fixtures(t, "../examples/policies/*.yaml") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			p, err := policy.LoadFile(context.Background(), file, policy.Options{Tools: policy.BuiltinSpecs()})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := p.RunTests(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Passed() || len(rep.Results) < 8 {
				t.Fatalf("%d tests, passed %t", len(rep.Results), rep.Passed())
			}
		})
	}
}

func policySchema(t *testing.T) *schema.Schema {
	t.Helper()
	s, err := schema.Embedded("policy.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// yamlToJSON decodes YAML into the values JSON Schema validation expects.
func yamlToJSON(t *testing.T, file string) (any, error) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	var conv func(any) any
	conv = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				v[k] = conv(x)
			}
		case []any:
			for i, x := range v {
				v[i] = conv(x)
			}
		case int:
			return float64(v)
		case time.Time:
			return v.Format(time.RFC3339)
		}
		return v
	}
	return conv(v), nil
}

// TestSchemaAgreesWithLoader: the JSON Schema accepts the example policies
// and every testdata policy that loads, and rejects the shape errors the
// loader rejects.
func TestSchemaAgreesWithLoader(t *testing.T) {
	s := policySchema(t)
	valid := append(fixtures(t, "../examples/policies/*.yaml"), "testdata/policies/errors.yaml", "testdata/memory.yaml")
	for _, file := range valid {
		t.Run(filepath.Base(file), func(t *testing.T) {
			v, err := yamlToJSON(t, file)
			if err == nil {
				err = s.Validate(v)
			}
			if err != nil {
				t.Fatalf("schema rejects a valid policy: %v", err)
			}
		})
	}
	for _, name := range []string{"unknown-fields", "types", "missing", "tests-shape"} {
		t.Run(name, func(t *testing.T) {
			file := "testdata/errors/" + name + ".yaml"
			v, err := yamlToJSON(t, file)
			if err == nil {
				err = s.Validate(v)
			}
			if err == nil {
				t.Fatal("schema accepts a policy the loader rejects for its shape")
			}
		})
	}
}
