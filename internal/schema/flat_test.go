package schema

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestFlatShape: which schemas take the flat path.
func TestFlatShape(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		flat      bool
	}{
		{"typed properties", `{"type":"object","properties":{"path":{"type":"string","description":"p"},"limit":{"type":"integer"}},"required":["path"]}`, true},
		{"closed", `{"type":"object","properties":{"a":{"type":"boolean"}},"additionalProperties":false}`, true},
		{"untyped property", `{"properties":{"a":{"description":"anything"}}}`, true},
		{"empty", `{}`, true},
		{"enum", `{"type":"object","properties":{"a":{"type":"string","enum":["x"]}}}`, false},
		{"format", `{"type":"object","properties":{"a":{"type":"string","format":"email"}}}`, false},
		{"type list", `{"type":"object","properties":{"a":{"type":["string","null"]}}}`, false},
		{"nested", `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string"}}}}}`, false},
		{"items", `{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}}}}`, false},
		{"schema additionalProperties", `{"type":"object","additionalProperties":{"type":"string"}}`, false},
		{"$schema", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`, false},
		{"minimum", `{"type":"object","properties":{"n":{"type":"integer","minimum":1}}}`, false},
		{"boolean property schema", `{"type":"object","properties":{"a":false}}`, false},
		{"$ref", `{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := CompileTool("t", []byte(c.doc))
			if err != nil {
				t.Fatal(err)
			}
			if got := s.flat != nil; got != c.flat {
				t.Fatalf("flat = %v, want %v", got, c.flat)
			}
		})
	}
}

// TestFlatAgreesWithValidator: for random argument objects against flat
// schemas, the flat check never says valid when the general validator
// finds a violation, and says valid whenever the general validator does
// (but for json.Number integers it leaves to the validator). Remove a
// check from flat.valid or hasType and this test fails.
func TestFlatAgreesWithValidator(t *testing.T) {
	docs := []string{
		`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}`,
		`{"type":"object","properties":{"n":{"type":"number"},"b":{"type":"boolean"},"z":{"type":"null"}},"additionalProperties":false}`,
		`{"type":"object","properties":{"o":{"type":"object"},"a":{"type":"array"},"any":{"title":"x"}},"required":["o","any"],"additionalProperties":true}`,
		`{"type":"object","required":["path"]}`,
	}
	values := []any{"x", "", true, false, nil, 0.0, 20.0, -3.0, 1.5, 1e21, json.Number("7"), json.Number("-7"), json.Number("7.5"),
		json.Number("1e2"), map[string]any{}, map[string]any{"k": "v"}, []any{}, []any{1.0}}
	names := []string{"path", "limit", "n", "b", "z", "o", "a", "any", "extra"}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, doc := range docs {
		s, err := CompileTool("t", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if s.flat == nil {
			t.Fatalf("%s: not flat", doc)
		}
		yes := 0
		for range 20000 {
			v := map[string]any{}
			for _, n := range names {
				if rng.IntN(2) == 0 {
					v[n] = values[rng.IntN(len(values))]
				}
			}
			fast := s.flat.valid(v)
			full := s.s.Validate(v) == nil
			if fast && !full {
				t.Fatalf("%s: flat says %v is valid, the validator: %v", doc, v, s.s.Validate(v))
			}
			if full && !fast && !hasNumber(v) {
				t.Fatalf("%s: flat leaves valid %v to the validator", doc, v)
			}
			if fast {
				yes++
			}
		}
		if yes == 0 {
			t.Fatalf("%s: no value took the flat path", doc)
		}
	}
}

func hasNumber(v map[string]any) bool {
	for _, x := range v {
		if _, ok := x.(json.Number); ok {
			return true
		}
	}
	return false
}

// TestFlatValidateAllocates nothing for a valid value: the general
// validator is not run.
func TestFlatValidateAllocatesNothing(t *testing.T) {
	s, err := CompileTool("t", []byte(`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}`))
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]any{"path": "main.go", "limit": 20.0}
	if n := testing.AllocsPerRun(100, func() {
		if err := s.Validate(v); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Validate allocated %v times per call", n)
	}
	// A violation still gets the validator's error, naming the field.
	err = s.Validate(map[string]any{"path": "main.go", "limit": "20"})
	if p := Problems(err); len(p) != 1 || p[0].Location != "/limit" {
		t.Fatalf("Problems = %v (%v)", p, err)
	}
}
