package telemetry

import (
	"testing"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// TestToolSource: the source label of a tool's metrics and spans is one
// of a few words, whatever the registry's source string says: every
// plugin language is "plugin", a module's or a server's name is dropped.
func TestToolSource(t *testing.T) {
	for src, want := range map[string]string{
		"":                "builtin",
		"builtin":         "builtin",
		"subprocess:git":  "plugin",
		"sdk:x":           "plugin",
		"wasm:jq":         "wasm",
		"mcp:filesystem":  "mcp",
		"declared:github": "declared",
	} {
		if got := toolSource(src); got != want {
			t.Errorf("toolSource(%q) = %q, want %q", src, got, want)
		}
	}
}

// TestParseServer: the model server's base URL gives server.address and
// server.port, the scheme's port when the URL has none; nothing for an
// in-process provider or a URL without a host.
func TestParseServer(t *testing.T) {
	for _, tc := range []struct {
		base string
		want serverAttrs
	}{
		{"", nil},
		{"not a url", nil},
		{"http://127.0.0.1:11434/v1", serverAttrs{semconv.ServerAddress("127.0.0.1"), semconv.ServerPort(11434)}},
		{"https://api.openai.com/v1", serverAttrs{semconv.ServerAddress("api.openai.com"), semconv.ServerPort(443)}},
		{"http://llm.internal/v1", serverAttrs{semconv.ServerAddress("llm.internal"), semconv.ServerPort(80)}},
	} {
		got := parseServer(tc.base)
		if len(got) != len(tc.want) {
			t.Errorf("parseServer(%q) = %v, want %v", tc.base, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("parseServer(%q)[%d] = %v, want %v", tc.base, i, got[i], tc.want[i])
			}
		}
	}
}
