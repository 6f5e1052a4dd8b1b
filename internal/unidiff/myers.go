package unidiff

import "math"

// maxEdits is where diff gives up on a shortest edit script of a part of
// the texts (its "too expensive" bound, 4096 for any texts under four
// million lines).
const maxEdits = 4096

// differ finds a shortest edit script between the lines of two texts
// (Myers, "An O(ND) Difference Algorithm and Its Variations", 1986, with
// the linear-space refinement of its section 4b) and marks the lines it
// deletes from a (ca) and inserts from b (cb).
type differ struct {
	a, b   []int  // the lines as numbers: equal lines, equal numbers
	ca, cb []bool // marked lines: deleted from a, inserted from b
	// fd and bd are the furthest x reached on each diagonal k = x−y by
	// the forward and the backward search, indexed k+off.
	fd, bd []int
	off    int
	work   int // diagonals examined so far
	limit  int
	// The lines looked at: a[lo:hiA] and b[lo:hiB].
	lo, hiA, hiB int
}

func newDiffer(la, lb []string, limit int) *differ {
	ids := make(map[string]int, len(la)+len(lb))
	number := func(lines []string) []int {
		out := make([]int, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	d := &differ{a: number(la), b: number(lb), limit: limit}
	d.ca, d.cb = make([]bool, len(la)), make([]bool, len(lb))
	// Diagonals run from −len(b) to len(a); one more on each side holds
	// the sentinels.
	n := len(la) + len(lb) + 3
	d.fd, d.bd, d.off = make([]int, n), make([]int, n), len(lb)+1
	return d
}

// run marks the edit script; false when it would take more work than the
// limit. Like diff, it looks only at the lines between the texts' common
// beginning and end (less Context lines each side), and sets aside the
// lines discards picks before the search.
func (d *differ) run() bool {
	na, nb := len(d.a), len(d.b)
	pre := 0
	for pre < na && pre < nb && d.a[pre] == d.b[pre] {
		pre++
	}
	suf := 0
	for suf < na-pre && suf < nb-pre && d.a[na-1-suf] == d.b[nb-1-suf] {
		suf++
	}
	lo := max(pre-Context, 0)
	d.lo, d.hiA, d.hiB = lo, na-max(suf-Context, 0), nb-max(suf-Context, 0)
	a, b := d.a[lo:d.hiA], d.b[lo:d.hiB]
	ids := 0
	for _, id := range a {
		ids = max(ids, id+1)
	}
	for _, id := range b {
		ids = max(ids, id+1)
	}
	inA, inB := make([]int, ids), make([]int, ids)
	for _, id := range a {
		inA[id]++
	}
	for _, id := range b {
		inB[id]++
	}
	// The search runs on the lines kept; real maps them back.
	keepA, realA := d.kept(a, discards(a, inB), d.ca[lo:], lo)
	keepB, realB := d.kept(b, discards(b, inA), d.cb[lo:], lo)
	full := *d
	d.a, d.b, d.ca, d.cb = keepA, keepB, make([]bool, len(keepA)), make([]bool, len(keepB))
	ok := d.compare(0, len(keepA), 0, len(keepB))
	for i, c := range d.ca {
		full.ca[realA[i]] = c
	}
	for i, c := range d.cb {
		full.cb[realB[i]] = c
	}
	full.work = d.work
	*d = full
	return ok
}

// kept returns the lines not set aside and their indexes in the whole
// text (from lo); it marks those set aside as changed.
func (d *differ) kept(lines []int, marks []byte, changed []bool, lo int) (keep, real []int) {
	for i, id := range lines {
		if marks[i] != 0 {
			changed[i] = true
			continue
		}
		keep = append(keep, id)
		real = append(real, lo+i)
	}
	return keep, real
}

// compare marks a shortest edit script of a[x0:x1] against b[y0:y1].
func (d *differ) compare(x0, x1, y0, y1 int) bool {
	for x0 < x1 && y0 < y1 && d.a[x0] == d.b[y0] {
		x0, y0 = x0+1, y0+1
	}
	for x1 > x0 && y1 > y0 && d.a[x1-1] == d.b[y1-1] {
		x1, y1 = x1-1, y1-1
	}
	switch {
	case x0 == x1:
		for y := y0; y < y1; y++ {
			d.cb[y] = true
		}
	case y0 == y1:
		for x := x0; x < x1; x++ {
			d.ca[x] = true
		}
	default:
		x, y, ok := d.split(x0, x1, y0, y1)
		if !ok {
			return false
		}
		return d.compare(x0, x, y0, y) && d.compare(x, x1, y, y1)
	}
	return true
}

// split finds a point (x, y) that a shortest edit script of a[x0:x1]
// against b[y0:y1] passes through, where the forward search from
// (x0, y0) and the backward search from (x1, y1) meet. Both ends are
// known to differ (compare stripped what they share).
func (d *differ) split(x0, x1, y0, y1 int) (x, y int, ok bool) {
	fd, bd, off := d.fd, d.bd, d.off
	lo, hi := x0-y1, x1-y0 // the diagonals of the box
	fmid, bmid := x0-y0, x1-y1
	odd := (fmid-bmid)&1 != 0
	fmin, fmax, bmin, bmax := fmid, fmid, bmid, bmid
	fd[fmid+off], bd[bmid+off] = x0, x1
	for c := 1; ; c++ {
		// diff stops looking for a shortest script after maxEdits and
		// takes a good-enough split; its diff is then not one this
		// package can reproduce, so it gives up there too.
		d.work += (fmax - fmin) + (bmax - bmin) + 2
		if d.work > d.limit || c >= maxEdits {
			return 0, 0, false
		}
		// One more edit forward: the diagonals reached widen by one each
		// side, until they meet the box. A missing neighbour reads −1.
		if fmin > lo {
			fmin--
			fd[fmin-1+off] = -1
		} else {
			fmin++
		}
		if fmax < hi {
			fmax++
			fd[fmax+1+off] = -1
		} else {
			fmax--
		}
		for k := fmax; k >= fmin; k -= 2 {
			left, up := fd[k-1+off], fd[k+1+off]
			x := up // an insertion: down from diagonal k+1
			if left >= up {
				x = left + 1 // a deletion: right from diagonal k−1
			}
			y := x - k
			for x < x1 && y < y1 && d.a[x] == d.b[y] {
				x, y = x+1, y+1
			}
			fd[k+off] = x
			if odd && bmin <= k && k <= bmax && bd[k+off] <= x {
				return x, y, true
			}
		}
		// One more edit backward. A missing neighbour reads +∞.
		if bmin > lo {
			bmin--
			bd[bmin-1+off] = math.MaxInt
		} else {
			bmin++
		}
		if bmax < hi {
			bmax++
			bd[bmax+1+off] = math.MaxInt
		} else {
			bmax--
		}
		for k := bmax; k >= bmin; k -= 2 {
			left, up := bd[k-1+off], bd[k+1+off]
			x := up - 1 // a deletion, backward: left from diagonal k+1
			if left < up {
				x = left // an insertion, backward: up from diagonal k−1
			}
			y := x - k
			for x > x0 && y > y0 && d.a[x-1] == d.b[y-1] {
				x, y = x-1, y-1
			}
			bd[k+off] = x
			if !odd && fmin <= k && k <= fmax && x <= fd[k+off] {
				return x, y, true
			}
		}
	}
}

// shift moves each run of marked lines of one text (lines, marks) within
// the freedom equal lines give, the way diff does: as late as it can go,
// joining the runs it meets; then back to the last place where its end
// meets a run of marked lines of the other text (other), if it passed
// one. Unmarked lines of the two texts stay in one-to-one order.
func shift(lines []int, marks, other []bool) {
	n, m := len(marks), len(other)
	// j is the line of the other text that corresponds to the first
	// unmarked line at or after i (m when there is none).
	i, j := 0, 0
	for {
		for i < n && !marks[i] {
			for j < m && other[j] {
				j++
			}
			i, j = i+1, j+1
		}
		if i == n {
			return
		}
		start := i
		for i < n && marks[i] {
			i++
		}
		for j < m && other[j] {
			j++
		}
		// The run is [start, i). meet is where its end last met a run
		// of the other text; n means nowhere yet.
		meet := n
		for {
			size := i - start
			// Back, while the line before the run equals its last line:
			// the run takes the line before and gives back its last one.
			for start > 0 && lines[start-1] == lines[i-1] {
				start, i = start-1, i-1
				marks[start], marks[i] = true, false
				for start > 0 && marks[start-1] {
					start--
				}
				for j--; other[j]; j-- {
				}
			}
			if j > 0 && other[j-1] {
				meet = i
			} else {
				meet = n
			}
			// Forward, while the line after the run equals its first.
			for i < n && lines[start] == lines[i] {
				marks[start], marks[i] = false, true
				start, i = start+1, i+1
				for i < n && marks[i] {
					i++
				}
				for j++; j < m && other[j]; j++ {
					meet = i
				}
			}
			if i-start == size {
				break
			}
		}
		// Back to where the run's end met a run of the other text.
		for meet < i {
			start, i = start-1, i-1
			marks[start], marks[i] = true, false
			for j--; other[j]; j-- {
			}
		}
	}
}
