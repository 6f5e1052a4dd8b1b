package main

import (
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/kernel"
)

// The CLI's embedded defaults and the kernel.yaml `kernel init` writes state
// the turn cap a person reads; they must say what the kernel does without
// them, kernel.DefaultMaxTurns.
func TestDefaultMaxTurnsAgrees(t *testing.T) {
	var d struct {
		Limits struct {
			MaxTurns int `yaml:"max_turns"`
		} `yaml:"limits"`
	}
	if err := yaml.Unmarshal(defaultsYAML, &d); err != nil {
		t.Fatal(err)
	}
	if d.Limits.MaxTurns != kernel.DefaultMaxTurns {
		t.Errorf("defaults.yaml limits.max_turns = %d, kernel.DefaultMaxTurns = %d", d.Limits.MaxTurns, kernel.DefaultMaxTurns)
	}
	if want := fmt.Sprintf("max_turns: %d ", kernel.DefaultMaxTurns); !strings.Contains(initConfigYAML, want) {
		t.Errorf("kernel init's kernel.yaml does not say %q", want)
	}
}
