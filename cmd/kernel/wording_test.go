package main

import "testing"

func TestCounted(t *testing.T) {
	for n, want := range map[int]string{0: "0 turns", 1: "1 turn", 2: "2 turns"} {
		if got := counted(n, "turn"); got != want {
			t.Errorf("counted(%d) = %q, want %q", n, got, want)
		}
	}
}
