package unidiff

// Before the search, diff sets aside the lines of each text that cannot
// help it: lines with no equal in the other text (they are changed
// whatever the script), and lines with very many equals when they sit
// inside a stretch of such lines. Leaving them out makes the search
// faster, and it also decides which of several shortest scripts comes
// out; to print what diff prints, unidiff sets aside the same lines.

// Marks given to a line by discards.
const (
	keep        = 0
	discard     = 1 // no equal in the other text
	provisional = 2 // many equals: discarded only inside a run of discards
)

// discards decides, for the lines of one text, which to set aside.
// count[id] is the number of lines of the other text numbered id.
func discards(lines []int, count []int) []byte {
	n := len(lines)
	many := 5
	for t := n / 64; ; {
		if t >>= 2; t <= 0 {
			break
		}
		many *= 2
	}
	marks := make([]byte, n)
	for i, id := range lines {
		switch c := count[id]; {
		case c == 0:
			marks[i] = discard
		case c > many:
			marks[i] = provisional
		}
	}
	for i := 0; i < n; i++ {
		if marks[i] == keep {
			continue
		}
		end := i
		provs := 0
		for end < n && marks[end] != keep {
			if marks[end] == provisional {
				provs++
			}
			end++
		}
		settleRun(marks[i:end], provs)
		i = end - 1
	}
	return marks
}

// settleRun decides the provisional lines of one run of lines marked for
// setting aside: they stay set aside only well inside the run.
func settleRun(run []byte, provs int) {
	// Provisional lines at either end of the run are kept.
	for len(run) > 0 && run[len(run)-1] == provisional {
		run[len(run)-1] = keep
		run = run[:len(run)-1]
		provs--
	}
	for len(run) > 0 && run[0] == provisional {
		run[0] = keep
		run = run[1:]
		provs--
	}
	n := len(run)
	if provs*4 > n {
		// A run that is a quarter provisional or more keeps them all.
		for k := range run {
			if run[k] == provisional {
				run[k] = keep
			}
		}
		return
	}
	// A stretch of `long` or more provisional lines is kept.
	long := 1
	for t := n >> 2; ; {
		if t >>= 2; t <= 0 {
			break
		}
		long <<= 1
	}
	long++
	for k, consec := 0, 0; k < n; k++ {
		if run[k] != provisional {
			consec = 0
			continue
		}
		if consec++; consec == long {
			for b := k - consec + 1; b <= k; b++ {
				run[b] = keep
			}
		} else if consec > long {
			run[k] = keep
		}
	}
	// From each end, provisional lines are kept until three discarded
	// lines in a row, or a discarded line at least eight lines in.
	settleEnd(run, func(k int) int { return k })
	settleEnd(run, func(k int) int { return n - 1 - k })
}

func settleEnd(run []byte, at func(int) int) {
	consec := 0
	for k := range run {
		i := at(k)
		if k >= 8 && run[i] == discard {
			return
		}
		switch run[i] {
		case provisional:
			run[i] = keep
			consec = 0
		case keep:
			consec = 0
		default:
			if consec++; consec == 3 {
				return
			}
		}
	}
}
