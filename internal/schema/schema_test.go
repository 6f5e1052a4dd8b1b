package schema_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/schema"
	"github.com/agentkernel/agentkernel/schemas"
)

// Every embedded schema compiles with the one set-up.
func TestEmbeddedSchemasCompile(t *testing.T) {
	files, err := fs.Glob(schemas.FS, "*.schema.json")
	if err != nil || len(files) < 7 {
		t.Fatalf("embedded schemas: %v %v", files, err)
	}
	for _, f := range files {
		if _, err := schema.Embedded(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := schema.Embedded("nope.schema.json"); err == nil {
		t.Error("a missing embedded schema compiled")
	}
	a, _ := schema.Embedded("events.schema.json")
	b, _ := schema.Embedded("events.schema.json")
	if a != b {
		t.Error("an embedded schema is compiled more than once")
	}
}

func TestToolSchemas(t *testing.T) {
	for _, tc := range []struct{ name, schema, want string }{
		{"not JSON", `{"type":`, "not a JSON object"},
		{"array", `[1]`, "not a JSON object"},
		{"not an object schema", `{"type":"array"}`, `type must be "object"`},
		{"bad keyword value", `{"type":"object","properties":{"a":{"type":"nope"}}}`, "invalid schema"},
		// The loader refuses every $ref outside the schema: no network, no disk.
		{"remote ref", `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`, "remote $ref"},
		{"file ref", `{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`, "remote $ref"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := schema.CompileTool("t", []byte(tc.schema))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CompileTool = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	s, err := schema.CompileTool("t", []byte(`{"type":"object","properties":{"n":{"type":"integer"},"u":{"type":"string","format":"email"}},"required":["n"],"$defs":{"x":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(map[string]any{"n": 1.0, "u": "not an email"}); err == nil {
		t.Errorf("format not asserted in a tool schema")
	}
	if err := s.Validate(map[string]any{"n": 1.0, "u": "a@example.com"}); err != nil {
		t.Errorf("valid arguments: %v", err)
	}
	err = s.Validate(map[string]any{"n": "x", "extra": map[string]any{}})
	probs := schema.Problems(err)
	if len(probs) != 1 || probs[0].Location != "/n" || !strings.Contains(probs[0].Message, "expected integer, got string") {
		t.Fatalf("problems = %+v (%v)", probs, err)
	}
	if err.Error() != probs[0].Location+": "+probs[0].Message {
		t.Errorf("Error() = %q", err)
	}
	if schema.Problems(errors.New("other")) != nil {
		t.Error("Problems of a plain error")
	}
	if err := s.Validate(map[string]any{}); schema.Problems(err)[0].Location != "/" {
		t.Errorf("root problem: %v", err)
	}
}

// Documents assert formats; ValidateJSON keeps numbers exact and rejects
// trailing data.
func TestDocumentSchemas(t *testing.T) {
	s, err := schema.Compile("d.json", []byte(`{"type":"object","properties":{"at":{"type":"string","format":"date-time"},"n":{"type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ValidateJSON([]byte(`{"at":"yesterday"}`)); err == nil || !strings.Contains(err.Error(), "/at") {
		t.Errorf("format not asserted: %v", err)
	}
	if err := s.ValidateJSON([]byte(`{"at":"2026-11-23T10:00:00Z","n":9007199254740993}`)); err != nil {
		t.Errorf("valid document: %v", err)
	}
	if err := s.ValidateJSON([]byte(`{"n":1.5}`)); err == nil {
		t.Error("1.5 accepted as an integer")
	}
	for _, bad := range []string{`{} {}`, `{`, ``} {
		if err := s.ValidateJSON([]byte(bad)); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
			t.Errorf("ValidateJSON(%q) = %v", bad, err)
		}
	}
	if _, err := schema.Compile("r.json", []byte(`{"$ref":"https://example.com/x.json"}`)); err == nil || !strings.Contains(err.Error(), "remote $ref") {
		t.Errorf("remote ref in a document schema: %v", err)
	}
}
