package policy

import (
	"slices"
	"testing"

	builtintools "github.com/agentkernel/agentkernel/plugins/builtin"
)

// TestBuiltinSpecsMatchTheTools keeps BuiltinSpecs honest: the tiers, tags
// and extracted arguments it assumes are those of plugins/builtin.
func TestBuiltinSpecsMatchTheTools(t *testing.T) {
	tools, closer, err := builtintools.New(builtintools.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	assumed := newSpecSet(nil)
	if len(tools) != len(BuiltinSpecs()) {
		t.Fatalf("%d built-in tools, BuiltinSpecs has %d", len(tools), len(BuiltinSpecs()))
	}
	for _, tool := range tools {
		real := tool.Spec()
		t.Run(real.Name, func(t *testing.T) {
			a := assumed.get(real.Name)
			if a.Tier != real.Tier || !slices.Equal(a.Tags, real.Tags) || a.Source != real.Source {
				t.Fatalf("assumed %s %v %s, real %s %v %s", a.Tier, a.Tags, a.Source, real.Tier, real.Tags, real.Source)
			}
			if got, want := newExtractor(a.Schema).fields, newExtractor(real.Schema).fields; !slices.Equal(got, want) {
				t.Fatalf("extracted arguments: assumed %v, real %v", got, want)
			}
		})
	}
}
