package config_test

import (
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/config"
)

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
