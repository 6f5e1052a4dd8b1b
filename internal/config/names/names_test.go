package names_test

import (
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/config/names"
)

func TestNameRules(t *testing.T) {
	for _, tc := range []struct {
		rule      *names.Rule
		max       int
		desc      string
		good, bad []string
	}{
		{names.ToolName, 64, "1-64 characters of A-Z a-z 0-9 _ . -",
			[]string{"read_file", "git.status", strings.Repeat("a", 64)}, []string{"", "has space", strings.Repeat("a", 65)}},
		{names.PluginToolName, 63, "1-63 characters of A-Z a-z 0-9 _ -",
			[]string{"status", strings.Repeat("B", 63)}, []string{"", "a.b", strings.Repeat("a", 64)}},
		{names.Namespace, 32, "1-32 characters of a-z 0-9 _ -, starting with a letter",
			[]string{"git", "a", "a" + strings.Repeat("1", 31)}, []string{"", "Git", "1git", "a" + strings.Repeat("1", 32)}},
		{names.ModuleName, 64, "1-64 characters of a-z 0-9 _ -, starting with a-z 0-9",
			[]string{"jq", "0x", strings.Repeat("a", 64)}, []string{"", "-x", "Jq", strings.Repeat("a", 65)}},
		{names.HookName, 64, "1-64 characters of A-Z a-z 0-9 _ . -",
			[]string{"no-rm"}, []string{"has space"}},
	} {
		t.Run(tc.rule.Pointer, func(t *testing.T) {
			if tc.rule.Max() != tc.max || tc.rule.Desc() != tc.desc {
				t.Errorf("max %d desc %q, want %d %q", tc.rule.Max(), tc.rule.Desc(), tc.max, tc.desc)
			}
			for _, s := range tc.good {
				if err := tc.rule.Check(s); err != nil {
					t.Errorf("%q refused: %v", s, err)
				}
			}
			for _, s := range tc.bad {
				err := tc.rule.Check(s)
				if err == nil || !strings.Contains(err.Error(), tc.desc) {
					t.Errorf("%q: %v", s, err)
				}
			}
		})
	}
}
