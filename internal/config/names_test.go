package config_test

import (
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/config"
)

func TestNameRules(t *testing.T) {
	for _, tc := range []struct {
		rule      *config.NameRule
		max       int
		desc      string
		good, bad []string
	}{
		{config.ToolName, 64, "1-64 characters of A-Z a-z 0-9 _ . -",
			[]string{"read_file", "git.status", strings.Repeat("a", 64)}, []string{"", "has space", strings.Repeat("a", 65)}},
		{config.PluginToolName, 63, "1-63 characters of A-Z a-z 0-9 _ -",
			[]string{"status", strings.Repeat("B", 63)}, []string{"", "a.b", strings.Repeat("a", 64)}},
		{config.Namespace, 32, "1-32 characters of a-z 0-9 _ -, starting with a letter",
			[]string{"git", "a", "a" + strings.Repeat("1", 31)}, []string{"", "Git", "1git", "a" + strings.Repeat("1", 32)}},
		{config.ModuleName, 64, "1-64 characters of a-z 0-9 _ -, starting with a-z 0-9",
			[]string{"jq", "0x", strings.Repeat("a", 64)}, []string{"", "-x", "Jq", strings.Repeat("a", 65)}},
		{config.HookName, 64, "1-64 characters of A-Z a-z 0-9 _ . -",
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

func TestPins(t *testing.T) {
	const lower = "3f5a000000000000000000000000000000000000000000000000000000000abc"
	for _, in := range []string{lower, strings.ToUpper(lower), "  " + lower + "\n"} {
		got, err := config.ParsePin(in)
		if err != nil || got != lower {
			t.Errorf("ParsePin(%q) = %q, %v", in, got, err)
		}
		if !config.PinMatches(in, lower) {
			t.Errorf("%q does not match its own sum", in)
		}
	}
	for _, bad := range []string{"", "3f5a", lower + "0", strings.Replace(lower, "a", "g", 1)} {
		if _, err := config.ParsePin(bad); err == nil || !strings.Contains(err.Error(), "is not 64 hex digits") {
			t.Errorf("ParsePin(%q): %v", bad, err)
		}
	}
	if config.PinMatches(lower, strings.Replace(lower, "3", "4", 1)) {
		t.Error("different sums match")
	}
}
