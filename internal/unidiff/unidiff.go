// Package unidiff writes the unified diff of two texts as GNU `diff -u`
// prints it: the same lines, the same hunks, the same headers, the same
// "\ No newline at end of file" markers, so that `patch -p1` applies it
// and a reviewer reads what diff would have shown. It is the one owner of
// the diffs the kernel shows; why it is not a library: RATIONALE.md, "The
// approval preview comes from the tool".
//
// The edit script is a shortest one (Myers' O(ND) algorithm, in linear
// space), and among the shortest ones it picks the one diff picks: runs of
// changes slid as late as they can go, merged where sliding joins them,
// then slid back to meet a change in the other text (the boundary
// shifting diff documents as "join changes as much as possible"). Above a
// work bound (Limits) it gives up rather than print a diff that is not
// the one diff would print.
package unidiff

import (
	"errors"
	"strconv"
	"strings"
)

// Context is the number of unchanged lines around each change, diff -u's.
const Context = 3

// ErrTooCostly is returned when the texts differ so much that a shortest
// edit script costs more work than the bound allows.
var ErrTooCostly = errors.New("the texts differ too much to compute their diff")

// DefaultMaxWork bounds the work of one diff: the sum, over the edit
// distance d, of the diagonals examined (at most d·(n+m)). 2e8 is about
// a second on a slow machine, and holds every change of up to a few
// thousand lines in files of a few thousand lines.
const DefaultMaxWork = 200_000_000

// Diff returns the unified diff that turns a into b, with the header
// lines "--- from" and "+++ to", as `diff -u --label from --label to`
// prints it; "" when a and b are equal. It never fails on text, but
// gives up with ErrTooCostly when the diff costs more than
// DefaultMaxWork.
func Diff(from, to, a, b string) (string, error) {
	return DiffWork(from, to, a, b, DefaultMaxWork)
}

// DiffWork is Diff with a bound on the work instead of DefaultMaxWork.
func DiffWork(from, to, a, b string, maxWork int) (string, error) {
	if a == b {
		return "", nil
	}
	la, lb := splitLines(a), splitLines(b)
	d := newDiffer(la, lb, maxWork)
	if !d.run() {
		return "", ErrTooCostly
	}
	lo, hiA, hiB := d.lo, d.hiA, d.hiB
	shift(d.a[lo:hiA], d.ca[lo:hiA], d.cb[lo:hiB])
	shift(d.b[lo:hiB], d.cb[lo:hiB], d.ca[lo:hiA])
	var w strings.Builder
	w.WriteString("--- " + from + "\n+++ " + to + "\n")
	writeHunks(&w, la, lb, changes(d.ca, d.cb))
	return w.String(), nil
}

// splitLines cuts s after every "\n"; the last line lacks one when s does
// not end with a newline.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := make([]string, 0, strings.Count(s, "\n")+1)
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}

// A change replaces the lines a[A:A+Del] with b[B:B+Ins].
type change struct{ A, Del, B, Ins int }

// changes reads the edit script off the marks: unchanged lines of a and
// b correspond one to one, in order.
func changes(ca, cb []bool) []change {
	var out []change
	i, j := 0, 0
	for i < len(ca) || j < len(cb) {
		c := change{A: i, B: j}
		for i < len(ca) && ca[i] {
			i++
		}
		for j < len(cb) && cb[j] {
			j++
		}
		c.Del, c.Ins = i-c.A, j-c.B
		if c.Del+c.Ins > 0 {
			out = append(out, c)
			continue
		}
		i, j = i+1, j+1
	}
	return out
}

// writeHunks prints the changes as unified hunks with Context lines of
// context; changes less than 2·Context+1 unchanged lines apart share a
// hunk.
func writeHunks(w *strings.Builder, a, b []string, cs []change) {
	for len(cs) > 0 {
		n := 1
		for n < len(cs) && cs[n].A-(cs[n-1].A+cs[n-1].Del) <= 2*Context {
			n++
		}
		first, last := cs[0], cs[n-1]
		// Context lines are unchanged, so there are as many in b as in a.
		aLo := max(first.A-Context, 0)
		bLo := first.B - (first.A - aLo)
		aHi := min(last.A+last.Del+Context, len(a))
		bHi := last.B + last.Ins + (aHi - (last.A + last.Del))
		w.WriteString("@@ -" + lineRange(aLo, aHi) + " +" + lineRange(bLo, bHi) + " @@\n")
		i := aLo
		for _, c := range cs[:n] {
			for ; i < c.A; i++ {
				writeLine(w, ' ', a[i])
			}
			for _, l := range a[c.A : c.A+c.Del] {
				writeLine(w, '-', l)
			}
			for _, l := range b[c.B : c.B+c.Ins] {
				writeLine(w, '+', l)
			}
			i = c.A + c.Del
		}
		for ; i < aHi; i++ {
			writeLine(w, ' ', a[i])
		}
		cs = cs[n:]
	}
}

// lineRange is a hunk header's range of lines [lo, hi) (0-based): "l,n",
// "l" alone when n is 1, and for an empty range the line before it.
func lineRange(lo, hi int) string {
	switch n := hi - lo; n {
	case 0:
		return strconv.Itoa(lo) + ",0"
	case 1:
		return strconv.Itoa(lo + 1)
	default:
		return strconv.Itoa(lo+1) + "," + strconv.Itoa(n)
	}
}

func writeLine(w *strings.Builder, mark byte, line string) {
	w.WriteByte(mark)
	w.WriteString(line)
	if !strings.HasSuffix(line, "\n") {
		w.WriteString("\n\\ No newline at end of file\n")
	}
}
