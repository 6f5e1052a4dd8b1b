package catalog_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel/catalog"
)

func TestLookup(t *testing.T) {
	c, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		window int
		ok     bool
	}{
		{"gpt-4o", 128000, true},
		{"gpt-4o-2024-08-06", 128000, true},
		{"gpt-4o-mini-2024-07-18", 128000, true},
		{"gpt-4.1-mini", 1047576, true},
		{"qwen2.5-coder:7b", 32768, true},
		{"my-model", 0, false},
		{"gpt-4omni", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := c.Lookup(tc.name)
			if ok != tc.ok || m.ContextWindow != tc.window {
				t.Fatalf("Lookup = %+v, %v", m, ok)
			}
		})
	}
	if m, _ := c.Lookup("gpt-4o-mini-2024-07-18"); m.Prices == nil || m.Prices.InputPerMTok != 0.15 {
		t.Fatalf("gpt-4o-mini snapshot took the wrong entry: %+v", m)
	}
}

func TestFileOverlay(t *testing.T) {
	p := filepath.Join(t.TempDir(), "models.yaml")
	os.WriteFile(p, []byte("models:\n  gpt-4o: {context_window: 64000}\n  local-x: {context_window: 16384, tokenizer: cl100k_base}\n"), 0o600)
	c, err := catalog.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := c.Lookup("gpt-4o")
	if m.ContextWindow != 64000 || m.Prices == nil || m.Prices.OutputPerMTok != 10 {
		t.Fatalf("overlay lost fields: %+v", m)
	}
	if m, ok := c.Lookup("local-x"); !ok || m.Tokenizer != "cl100k_base" {
		t.Fatalf("new entry: %+v %v", m, ok)
	}
}

func TestBadFile(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"unknown-field": "models:\n  m: {context_windw: 1}\n",
		"bad-tokenizer": "models:\n  m: {tokenizer: p50k}\n",
		"bad-protocol":  "models:\n  m: {tool_protocol: sometimes}\n",
		"bad-format":    "models:\n  m: {tool_format: xml}\n",
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name+".yaml")
			os.WriteFile(p, []byte(body), 0o600)
			_, err := catalog.Load(p)
			if err == nil || !strings.Contains(err.Error(), p) {
				t.Fatalf("err = %v, want one naming %s", err, p)
			}
		})
	}
}

func TestToolProtocol(t *testing.T) {
	p := filepath.Join(t.TempDir(), "models.yaml")
	os.WriteFile(p, []byte("models:\n  gemma3: {tool_format: json}\n"), 0o600)
	c, err := catalog.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][2]string{
		"gemma3:4b":   {"auto", "json"}, // the overlay keeps the protocol, sets the format
		"llama3.2:3b": {"", "json"},
		"llama3:8b":   {"auto", "json"},
		"gpt-4o":      {"", ""},
	} {
		m, _ := c.Lookup(name)
		if got := [2]string{m.ToolProtocol, m.ToolFormat}; got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

func Example() {
	c, _ := catalog.Load()
	m, _ := c.Lookup("gpt-4o-mini-2024-07-18")
	fmt.Println(m.ContextWindow, m.Tokenizer, *m.ParallelToolCalls)
	// Output: 128000 o200k_base true
}
