package hooks

import (
	"strings"
	"testing"
)

// TestScrubAgentkernelAPIKey: a `kernel keys create` secret is redacted
// wherever it appears (a log line, an event, a tool's output).
func TestScrubAgentkernelAPIKey(t *testing.T) {
	s, err := NewScrubber(ScrubberConfig{})
	if err != nil {
		t.Fatal(err)
	}
	key := "aks_0a1b2c3d4e5f_Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5d2FsZG8"
	for _, text := range []string{
		"Authorization: " + key,
		`{"key":"` + key + `"}`,
		"curl -H 'X-Key: " + key + "' http://127.0.0.1:8080/v1/sessions",
	} {
		out, n := s.Scrub(text)
		if n == 0 || strings.Contains(out, key[4:20]) {
			t.Errorf("Scrub(%q) = %q: the key survived", text, out)
		}
	}
	f := s.Find("key " + key)
	if len(f) != 1 || f[0].Class != "agentkernel_api_key" {
		t.Errorf("Find = %+v, want one agentkernel_api_key", f)
	}
}
