package policy_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/policy"
)

// FuzzLoad feeds arbitrary bytes to the loader. Load must return a policy
// or an error, never panic; a policy that loads must then decide, choose a
// surface, check budgets and explain without panicking.
func FuzzLoad(f *testing.F) {
	for _, pattern := range []string{"../examples/policies/*.yaml", "testdata/errors/*.yaml", "testdata/policies/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte("name: x\nrevision: 1\ndefaults: {tool_call: deny}\nvars: {a: v.a}\n"))
	f.Add([]byte("&a [*a]"))
	specs := policy.BuiltinSpecs()
	st := &kernel.State{Run: 1, Turn: 2, Prompt: "fix it", ToolCounts: map[string]int{"read_file": 3}}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := policy.Load(context.Background(), "fuzz.yaml", data, policy.Options{})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		ctx := context.Background()
		p.Surface(ctx, st, specs)
		p.Budget(ctx, st, kernel.AfterTools)
		for _, args := range []string{`{"path":"src/../.env","argv":["rm","-rf","/"]}`, `{}`} {
			for _, spec := range specs {
				c, err := kernel.NewCall("c", spec, []byte(args), st)
				if err != nil {
					t.Fatal(err)
				}
				if d := p.Decide(ctx, st, c); d.Effect == "" {
					t.Fatalf("empty effect: %+v", d)
				}
			}
		}
		in := policy.Input{Call: policy.CallInput{Tool: "run_command", Args: map[string]any{"argv": []any{"ls"}}}}
		if _, err := p.Explain(in); err != nil {
			t.Fatal(err)
		}
	})
}
