package config

import (
	"fmt"
	"strings"
)

// Suggest returns the candidate a misspelt name most likely meant, or ""
// when none is close: the same name but for case and '-'/'_' ("maxTurns",
// "max-turns" for max_turns), else the one nearest by edits (a letter
// added, dropped, changed or two swapped: "promt" for prompt, "max_trun"
// for max_turn), within a third of the name's length. A tie between two
// candidates suggests neither.
func Suggest(name string, candidates []string) string {
	folded := fold(name)
	for _, c := range candidates {
		if c != name && fold(c) == folded {
			return c
		}
	}
	limit := max(1, len(name)/3)
	best, bestD, tie := "", limit+1, false
	for _, c := range candidates {
		if c == name {
			continue
		}
		d := editDistance(strings.ToLower(name), strings.ToLower(c))
		switch {
		case d < bestD:
			best, bestD, tie = c, d, false
		case d == bestD:
			tie = true
		}
	}
	if best == "" || tie {
		return ""
	}
	return best
}

// DidYouMean is "; did you mean `x`?" for Suggest's answer, or "".
func DidYouMean(name string, candidates []string) string {
	if s := Suggest(name, candidates); s != "" {
		return fmt.Sprintf("; did you mean `%s`?", s)
	}
	return ""
}

func fold(s string) string {
	return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
}

// editDistance is the optimal string alignment distance of a and b:
// insertions, deletions, substitutions and swaps of two neighbours.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j]: distance of ra[:i] and rb[:j]; three rows suffice.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
