package hooks

import (
	"math"
	"sort"
	"strings"
)

// The high-entropy detector's parameters.
const (
	entropyMinLen = 24
	entropyMaxLen = 512
	// entropyMinBits is the Shannon entropy, in bits per character, a
	// token needs.
	entropyMinBits = 3.8
	// wordyMax is the share of a token's characters in words (runs of
	// four or more letters that read like [A-Z]?[a-z]+) above which it is
	// an identifier, not a secret. Random base62 tokens stay below it 99
	// times in 100.
	wordyMax = 0.6
)

func isTokenChar(c byte) bool { return classes[c]&cToken != 0 }

// highEntropy finds random-looking tokens.
func (f *finder) highEntropy() {
	t := f.text
	for i := 0; i < len(t); {
		if !isTokenChar(t[i]) {
			i++
			continue
		}
		s := i
		for i < len(t) && isTokenChar(t[i]) {
			i++
		}
		e := i
		for e < len(t) && t[e] == '=' {
			e++
		}
		i = e
		if n := e - s; n >= entropyMinLen && n <= entropyMaxLen {
			f.entropyToken(s, e)
		}
	}
}

func (f *finder) entropyToken(s, e int) {
	t := f.text
	core := strings.TrimRight(t[s:e], "=")
	if f.isQuiet(s) || publicFormat(t, s, core) || publicValue(t, s, core) || blobLine(t, s, e) {
		return
	}
	if !structured(core) {
		// Decoding is the last test: only tokens that would be reported.
		if randomLooking(core) && !benignBase64(t[s:e]) {
			f.add(s, e, ClassHighEntropy)
		}
		return
	}
	// A structured token (a path, a name with parts): each part on its own;
	// a random part takes its non-word neighbours along.
	type seg struct{ s, e int }
	var segs []seg
	for i := 0; i < len(core); {
		j := i
		for j < len(core) && !isSeparator(core[j]) {
			j++
		}
		if j > i {
			segs = append(segs, seg{s + i, s + j})
		}
		i = j + 1
	}
	for k := 0; k < len(segs); k++ {
		if segs[k].e-segs[k].s < entropyMinLen || !randomLooking(t[segs[k].s:segs[k].e]) || benignBase64(t[s:e]) || publicValue(t, segs[k].s, t[segs[k].s:segs[k].e]) {
			continue
		}
		a, b := k, k
		for a > 0 && !wordlike(t[segs[a-1].s:segs[a-1].e]) {
			a--
		}
		for b+1 < len(segs) && !wordlike(t[segs[b+1].s:segs[b+1].e]) {
			b++
		}
		end := segs[b].e
		if b == len(segs)-1 {
			end = e // keep the padding with the token
		}
		f.add(segs[a].s, end, ClassHighEntropy)
		k = b
	}
}

// isQuiet reports whether at is in a quiet span (they are sorted and
// disjoint).
func (f *finder) isQuiet(at int) bool {
	j := sort.Search(len(f.quiet), func(j int) bool { return f.quiet[j][1] > at })
	return j < len(f.quiet) && f.quiet[j][0] <= at
}

func isSeparator(c byte) bool { return c == '/' || c == '-' || c == '_' }

// structured reports a token with a word between separators: a path, a
// package or pod name, a constant.
func structured(tok string) bool {
	if strings.IndexAny(tok, "/-_") < 0 {
		return false
	}
	for i := 0; i < len(tok); {
		j := i
		for j < len(tok) && !isSeparator(tok[j]) {
			j++
		}
		if wordlike(tok[i:j]) {
			return true
		}
		i = j + 1
	}
	return false
}

// wordlike reports a part made of 3+ letters in one case pattern: lower,
// UPPER or Capitalized.
func wordlike(p string) bool {
	if len(p) < 3 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if !isLetter(p[i]) {
			return false
		}
	}
	rest := p[1:]
	return strings.ToLower(rest) == rest || strings.ToUpper(p) == p
}

// randomLooking is the core test: length, not hex, mixed classes, entropy,
// not words.
func randomLooking(tok string) bool {
	if len(tok) < entropyMinLen {
		return false
	}
	var upper, low, digit, hex int
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case isUpper(c):
			upper++
		case isLower(c):
			low++
		case isDigit(c):
			digit++
		}
		if isHex(c) || c == '-' {
			hex++
		}
	}
	if hex == len(tok) {
		return false // hashes, UUIDs, hex ids
	}
	classes := 0
	for _, n := range []int{upper, low, digit} {
		if n > 0 {
			classes++
		}
	}
	if classes < 2 {
		return false
	}
	if shannon(tok) < entropyMinBits {
		return false
	}
	return wordiness(tok) < wordyMax
}

// shannon is the Shannon entropy of s in bits per byte.
func shannon(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n := float64(len(s))
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// wordiness is the share of s in runs of 4+ letters shaped [A-Z]?[a-z]+.
func wordiness(s string) float64 {
	inWords := 0
	for i := 0; i < len(s); {
		j := i
		if isUpper(s[j]) {
			j++
		}
		k := j
		for k < len(s) && isLower(s[k]) {
			k++
		}
		if k-j >= 2 && k-i >= 4 {
			inWords += k - i
		}
		if k == i {
			k++
		}
		i = k
	}
	return float64(inWords) / float64(len(s))
}

// publicFormat reports a token that is a known public value: SRI and
// go.sum hashes, crypt(3) password hashes, SSH public keys, ULIDs, data:
// URIs.
func publicFormat(t string, s int, tok string) bool {
	for _, p := range []string{"sha1-", "sha256-", "sha384-", "sha512-"} {
		if strings.HasPrefix(tok, p) {
			return true
		}
	}
	before := t[max(0, s-64):s]
	switch {
	case strings.HasSuffix(before, "h1:"), strings.HasSuffix(before, "base64,"):
		return true
	case strings.HasSuffix(before, "$") && strings.Count(before[max(0, len(before)-40):], "$") >= 2:
		return true // $2b$12$..., $6$salt$...
	case strings.HasPrefix(tok, "AAAA"):
		w := strings.TrimRight(before, " ")
		if sp := strings.LastIndexAny(w, " \t\n\"'"); sp >= 0 {
			w = w[sp+1:]
		}
		for _, p := range []string{"ssh-", "ecdsa-", "sk-ssh-", "sk-ecdsa-"} {
			if strings.HasPrefix(w, p) {
				return true
			}
		}
	case isULID(tok):
		return true
	}
	return false
}

// isULID reports a ULID: 26 characters of Crockford base32, the first at
// most '7'.
func isULID(s string) bool {
	if len(s) != 26 || s[0] > '7' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isDigit(c) && (!isUpper(c) || c == 'I' || c == 'L' || c == 'O' || c == 'U') {
			return false
		}
	}
	return true
}

// blobLine reports a token that fills its line in a block of such lines:
// wrapped base64 (MIME parts, PEM bodies), which is data, not a secret. A
// line of 60 or more characters followed by another token line is in a
// block, and so is the line after it (the block's last line, often shorter):
// two token lines are neighbours when the upper one has 60+ characters.
func blobLine(t string, s, e int) bool {
	if !lineIsToken(t, s, e) {
		return false
	}
	if e-s >= 60 && e < len(t) && t[e] == '\n' {
		ns := e + 1
		ne := ns
		for ne < len(t) && isBlobChar(t[ne]) {
			ne++
		}
		if ne-ns >= 4 && lineIsToken(t, ns, ne) {
			return true
		}
	}
	if s > 0 && t[s-1] == '\n' {
		pe := s - 1
		if pe > 0 && t[pe-1] == '\r' {
			pe--
		}
		ps := pe
		for ps > 0 && isBlobChar(t[ps-1]) {
			ps--
		}
		if pe-ps >= 60 && e-s >= 4 && lineIsToken(t, ps, pe) {
			return true
		}
	}
	return false
}

func isBlobChar(c byte) bool { return isTokenChar(c) || c == '=' }

func lineIsToken(t string, s, e int) bool {
	return (s == 0 || t[s-1] == '\n') && (e == len(t) || t[e] == '\n' || t[e] == '\r')
}
