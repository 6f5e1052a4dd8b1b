package main

import "strconv"

// counted writes n and noun, plural unless n is 1: "1 turn", "3 turns".
// The nouns are the glossary's (run, turn; see package kernel).
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
