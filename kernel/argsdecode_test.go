package kernel

import (
	"encoding/json"
	"reflect"
	"testing"
)

var flatSeeds = []string{
	`{"path":"main.go","limit":20}`,
	` { "a" : -0.5e+3 , "b" : true, "c": false, "d": null, "e": "" } `,
	`{}`, `{ }`, `{"a":1,"a":2}`, `{"é":"ü✓"}`, `{"n":1e400}`, `{"n":01}`, `{"n":1.}`, `{"n":-}`,
	`{"s":"a\"b"}`, `{"s":"tab	in"}`, `{"o":{}}`, `{"l":[1]}`, `{"a":1,}`, `{"a":1}x`, `{"a":1}{}`,
	`[]`, `"s"`, `{"a" 1}`, `{a:1}`, `{"a":tru}`, `{"a":truex}`, "{\"s\":\"\xff\"}", `{"n":2E-2}`, `{"n":-0}`,
}

// FuzzDecodeFlat: whenever decodeFlat decodes arguments, encoding/json
// decodes them to the same value; whatever it leaves, encoding/json gets.
func FuzzDecodeFlat(f *testing.F) {
	for _, s := range flatSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, ok := decodeFlat(data)
		if !ok {
			return
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("decodeFlat took %q, encoding/json refuses it: %v", data, err)
		}
		if !reflect.DeepEqual(v, map[string]any(m)) {
			t.Fatalf("decodeFlat(%q) = %#v, encoding/json: %#v", data, m, v)
		}
	})
}

// TestDecodeFlatTakesScalarObjects: the common arguments take the fast
// path, anything else is left to encoding/json.
func TestDecodeFlatTakesScalarObjects(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{`{"path":"main.go","limit":20}`, true},
		{` { "a" : -0.5e+3 , "b" : true, "c": false, "d": null, "e": "" } `, true},
		{`{}`, true},
		{`{"é":"ü✓"}`, true},
		{`{"s":"a\"b"}`, false},
		{`{"o":{}}`, false},
		{`{"l":[1]}`, false},
		{`{"n":1e400}`, false},
		{`{"n":01}`, false},
		{`{"a":1,}`, false},
		{`{"a":1}x`, false},
		{"{\"s\":\"\xff\"}", false},
	} {
		t.Run(c.in, func(t *testing.T) {
			m, ok := decodeFlat([]byte(c.in))
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v", ok, c.ok)
			}
			if !ok {
				return
			}
			var v any
			if err := json.Unmarshal([]byte(c.in), &v); err != nil || !reflect.DeepEqual(v, map[string]any(m)) {
				t.Fatalf("%#v, encoding/json: %#v (%v)", m, v, err)
			}
		})
	}
}
