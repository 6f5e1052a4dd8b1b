package hooks

// textShape is what one pass over a short text tells detect before the
// detectors scan it: which bytes that every finding of a detector needs
// the text holds, its longest run of token bytes, and which structure
// literals occur. A detector whose needed byte is absent, or the entropy
// detector when no run is long enough, would scan the text and find
// nothing; detect skips it. The findings are the same as with every
// detector run (TestGateChangesNothing, against allShape).
//
// Why one pass: on a short text (a prompt, a small tool result) each
// detector's scan costs more in set-up and cold tables than in bytes;
// the kernel's loop scrubs two such texts a run (RATIONALE.md, "The
// scrubber's gate: one pass says which detectors can find anything
// (issue 45)").
type textShape struct {
	has    uint8  // gate bits of the bytes the text holds
	maxRun int    // longest run of bytes in [A-Za-z0-9+/_=-]
	lits   litSet // the structure literals the text holds
	// cut: the format detectors try no start closer to the end than
	// minFormatLen (false in allShape: they try every byte).
	cut bool
}

// Gate bits: a byte a detector cannot find anything without.
const (
	gColon uint8 = 1 << iota // urlCredentials ("://"), assignments (key: v, :=), .pgpass lines
	gEq                      // assignments (key=v, =>)
	gGt                      // assignments (<key>v</key>)
	gDash                    // assignments (--key v), privateKeys ("-----BEGIN ")
	gRun                     // the entropy detector's token bytes and its '=' padding
	gLit                     // starts one of structureLits
	gAll   = gColon | gEq | gGt | gDash | gRun | gLit
)

var gateBits = func() (t [256]uint8) {
	t[':'] |= gColon
	t['='] |= gEq | gRun
	t['>'] |= gGt
	t['-'] |= gDash
	for c := range 256 {
		if isTokenChar(byte(c)) {
			t[c] |= gRun
		}
	}
	for _, l := range structureLits {
		t[l[0]] |= gLit
	}
	return t
}()

// allShape runs every detector: what a text longer than shortScan gets.
var allShape = textShape{has: gAll, maxRun: entropyMaxLen, lits: allLits}

// shapeOf makes one pass over t (allShape past shortScan). Its lits are
// litsIn's: exactly the literals strings.Contains finds.
func shapeOf(t string) textShape {
	if len(t) > shortScan {
		return allShape
	}
	sh := textShape{cut: true}
	run := 0
	for i := 0; i < len(t); i++ {
		c := t[i]
		g := gateBits[c]
		sh.has |= g
		if g&gRun != 0 {
			run++
			sh.maxRun = max(sh.maxRun, run)
		} else {
			run = 0
		}
		if g&gLit != 0 {
			for _, k := range litsByFirst[c] {
				if hasPrefixAt(t, i, structureLits[k]) {
					sh.lits |= 1 << k
				}
			}
		}
	}
	return sh
}

func hasPrefixAt(t string, i int, p string) bool {
	return len(t)-i >= len(p) && t[i:i+len(p)] == p
}

// run runs the detectors sh lets through.
func (f *finder) run(sh textShape, entropy bool) {
	if sh.has&gDash != 0 {
		f.privateKeys()
	}
	if sh.has&gColon != 0 {
		f.urlCredentials()
	}
	f.formats(sh.cut)
	if sh.has&(gColon|gEq|gGt|gDash) != 0 {
		f.assignments()
	}
	if sh.lits != 0 || sh.has&gColon != 0 { // no literal: only .pgpass lines (':') are left
		f.structuresIn(sh.lits)
	}
	if entropy && sh.maxRun >= entropyMinLen {
		f.highEntropy()
	}
}
