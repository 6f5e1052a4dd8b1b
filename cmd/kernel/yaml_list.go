package main

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// yamlListItems writes items as a YAML list at column 0, the lines
// comments returns for an item written as comments under its first line,
// and a blank line after each item: what `mcp import` and `tools import`
// print for an operator to paste or let them --write.
func yamlListItems[T any](items []T, comments func(T) []string) (string, error) {
	var b strings.Builder
	for _, it := range items {
		y, err := yaml.Marshal([]T{it})
		if err != nil {
			return "", err
		}
		lines := strings.SplitAfter(strings.TrimRight(string(y), "\n"), "\n")
		b.WriteString(lines[0])
		if !strings.HasSuffix(lines[0], "\n") {
			b.WriteString("\n")
		}
		for _, c := range comments(it) {
			b.WriteString("  # " + c + "\n")
		}
		for _, l := range lines[1:] {
			b.WriteString(l)
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}
