package config

import "testing"

func TestSuggest(t *testing.T) {
	fields := []string{"max_turns", "tool_timeout", "approval_ttl", "max_concurrent_tools", "max_corrections"}
	for _, tc := range []struct{ name, want string }{
		{"max_turn", "max_turns"},
		{"maxTurns", "max_turns"},
		{"max-turns", "max_turns"},
		{"max_truns", "max_turns"},
		{"tool_timout", "tool_timeout"},
		{"approval", ""},  // too far from approval_ttl
		{"color", ""},     // nothing close
		{"max_turns", ""}, // not misspelt
		{"max_corrects", "max_corrections"},
	} {
		if got := Suggest(tc.name, fields); got != tc.want {
			t.Errorf("Suggest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := Suggest("promt", []string{"prompt", "session_id", "metadata"}); got != "prompt" {
		t.Errorf("promt: %q", got)
	}
	// Equally near two candidates: no guess.
	if got := Suggest("ab", []string{"ac", "ad"}); got != "" {
		t.Errorf("a tie suggested %q", got)
	}
}
