package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-runewidth"
	"golang.org/x/term"
)

// A table that fits the terminal: `kernel tools` (and any list whose cells
// can be long) writes its rows through writeTable, which cuts the cells of
// the columns that may be cut, widest first, with "…" until every line
// fits the terminal's width. Where stdout is not a terminal nothing is
// cut: a script reads the whole table (or uses --json).

// tableGap is the space between two columns.
const tableGap = 2

// minCut is the narrowest a column that may be cut becomes (with its "…").
const minCut = 8

// terminalWidth is w's width in columns when w is a terminal, or 0.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f) {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil || cols <= 0 {
		return 0
	}
	return cols
}

// writeTable writes rows (the first is the header) as aligned columns. With
// width > 0 the cells of the columns in cut are shortened until each line
// is at most width columns; if that is not enough, the other columns are
// cut too, last first. It reports whether it cut anything.
func writeTable(w io.Writer, rows [][]string, width int, cut ...int) (bool, error) {
	if len(rows) == 0 {
		return false, nil
	}
	n := len(rows[0])
	widths := make([]int, n)
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], runewidth.StringWidth(c))
		}
	}
	cutAny := false
	if width > 0 {
		over := tableGap*(n-1) - width
		for _, x := range widths {
			over += x
		}
		var others []int
		for i := n - 1; i >= 0; i-- { // last first
			if !containsInt(cut, i) {
				others = append(others, i)
			}
		}
		for _, cols := range [][]int{cut, others} {
			for ; over > 0; over-- {
				widest := -1
				for _, i := range cols {
					if widths[i] > minCut && (widest < 0 || widths[i] > widths[widest]) {
						widest = i
					}
				}
				if widest < 0 {
					break // every column of cols is at its narrowest
				}
				widths[widest]--
				cutAny = true
			}
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if runewidth.StringWidth(c) > widths[i] {
				c = runewidth.Truncate(c, widths[i], "…")
			}
			b.WriteString(c)
			if i < n-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-runewidth.StringWidth(c)+tableGap))
			}
		}
		if _, err := fmt.Fprintln(w, strings.TrimRight(b.String(), " ")); err != nil {
			return cutAny, err
		}
	}
	return cutAny, nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
