package builtin_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/plugins/builtin"
	"github.com/agentkernel/agentkernel/policy"
)

// TestSymlinkPathsTriggerRules runs the built-ins under coding.yaml through
// the kernel: a symbolic link inside the workspace must not let a write
// outside src/ or a read of .env skip its ask. Before path resolution the
// rules saw "src/up/Makefile" and "src/envlink" and allowed both.
func TestSymlinkPathsTriggerRules(t *testing.T) {
	cases := []struct {
		name, tool, args, rule, typed string
	}{
		{"write through src/up -> ..", "write_file", `{"path":"src/up/Makefile","content":"all:\n"}`, "writes-outside-src", "src/up/Makefile"},
		{"read through src/envlink -> ../.env", "read_file", `{"path":"src/envlink"}`, "env-files", "src/envlink"},
		{"search with glob .env*", "search", `{"pattern":"KEY","glob":".env*"}`, "env-files", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			if err := os.MkdirAll(filepath.Join(ws, "src"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("API_KEY=not-a-real-key\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("..", filepath.Join(ws, "src", "up")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../.env", filepath.Join(ws, "src", "envlink")); err != nil {
				t.Fatal(err)
			}
			tools, closer, err := builtin.New(builtin.Config{Root: ws})
			if err != nil {
				t.Fatal(err)
			}
			defer closer.Close()
			reg := kernel.NewRegistry()
			if err := reg.Register(tools...); err != nil {
				t.Fatal(err)
			}
			pol, err := policy.LoadFile(context.Background(), "../../examples/policies/coding.yaml", policy.Options{Tools: reg.Specs()})
			if err != nil {
				t.Fatal(err)
			}
			prov := kerneltest.NewProvider(kerneltest.Calls(tc.tool, tc.args), kerneltest.Text("done"))
			k, err := kernel.New(kernel.Config{Provider: prov, Store: memory.New(), Tools: reg, Policy: pol, Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			res, err := k.Run(context.Background(), "", "please fix and update the build")
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != kernel.StopAwaitingApproval || res.Pending == nil {
				t.Fatalf("stop %s: the call ran without the %s ask (calls %+v)", res.StopReason, tc.rule, res.Calls)
			}
			d := res.Calls[0].Decision
			if d == nil || len(d.Rules) == 0 || d.Rules[0] != tc.rule {
				t.Fatalf("decision %+v, want rule %s", d, tc.rule)
			}
			if tc.typed != "" {
				if d.Resolved["path"] != tc.typed {
					t.Fatalf("decision does not say the path was resolved: %+v", d.Resolved)
				}
				if strings.Contains(string(res.Pending.Args), tc.typed) {
					t.Fatalf("the approver sees the typed path, not the real one: %s", res.Pending.Args)
				}
			}
			if _, err := os.Stat(filepath.Join(ws, "Makefile")); err == nil {
				t.Fatal("the write happened before approval")
			}
		})
	}
}
