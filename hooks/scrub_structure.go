package hooks

import (
	"regexp"
	"strings"
)

// Structure-aware detectors: credentials recognised by where they stand in
// a command line or a call, not by their own shape. Each regular
// expression is anchored and run only where a cheap literal search found
// its start, so the scan stays linear and fast on large outputs.
var (
	// After "-u", "--user", "--proxy-user" or "-U": user:pass (the part
	// after the first ':' is the secret).
	userValueRE = regexp.MustCompile(`^(?:=|[ \t]+)['"]?[^\s:'"]{1,256}:([^\s'"]{1,512})`)
	// After "mysql" (and friends) on the same line: " -pSECRET".
	mysqlPassRE = regexp.MustCompile(`^[^\n]{0,512}?\s-p([^\s'"]{1,512})`)
	// After "sshpass": " -p SECRET".
	sshpassRE = regexp.MustCompile(`^\s+-p\s*['"]?([^\s'"]{1,512})`)
	// After "(": "NAME", "literal default").
	defaultArgRE = regexp.MustCompile(`^\(\s*["']([A-Za-z0-9_.\-]{2,64})["']\s*,\s*["']([^"'\n]{4,512})["']\s*\)`)
	// Twilio-style pairs: an account id (AC + 32 hex) with a 32-hex secret
	// near it.
	hex32RE = regexp.MustCompile(`\b[0-9a-f]{32}\b`)
)

// window is t from i, at most n bytes.
func window(t string, i, n int) string { return t[i:min(len(t), i+n)] }

// eachIndex calls fn with every index of sub in t.
func eachIndex(t, sub string, fn func(i int)) {
	for off := 0; ; {
		k := strings.Index(t[off:], sub)
		if k < 0 {
			return
		}
		fn(off + k)
		off += k + len(sub)
	}
}

// structureLits are the literals structures searches for; the index of
// each is its bit in a litSet.
var structureLits = [...]string{"-u", "-U", "--user", "--proxy-user", "mysql", "mariadb", "sshpass", "(", "Q~", "AC"}

const (
	litFlags   = 0 // the first four: -u, -U, --user, --proxy-user
	litMysql   = 4 // mysql, mariadb
	litSshpass = 6
	litParen   = 7
	litAzure   = 8
	litTwilio  = 9
)

// litSet says which of structureLits a text holds (bit i for
// structureLits[i]).
type litSet uint16

const allLits litSet = 1<<len(structureLits) - 1

// litsByFirst lists, for each byte, the structureLits that start with it.
var litsByFirst = func() (t [256][]uint8) {
	for i, l := range structureLits {
		t[l[0]] = append(t[l[0]], uint8(i))
	}
	return t
}()

// shortScan is the length up to which litsIn finds which literals a text
// holds in one pass over it: on a short text (a prompt, a small tool
// result) the ten strings.Index calls structures made cost more in set-up
// than the pass. Longer texts keep the Index search (allLits).
const shortScan = 512

// litsIn returns which of structureLits occur in t: exactly those for
// which strings.Contains(t, lit) holds (TestLitsInIsContains), or allLits
// when t is longer than shortScan. It is shapeOf's (one pass over t, with
// the other gates). structuresIn searches each literal in the set as
// before and skips the others, whose search would have found nothing: the
// findings are the same (TestStructuresGateChangesNothing).
func litsIn(t string) litSet { return shapeOf(t).lits }

// structuresIn runs the structure-aware detectors, searching only the
// literals in has (allLits: every one).
func (f *finder) structuresIn(has litSet) {
	t := f.text
	each := func(k int, fn func(i int)) {
		if has&(1<<k) != 0 {
			eachIndex(t, structureLits[k], fn)
		}
	}
	for k := litFlags; k < litFlags+4; k++ {
		flag := structureLits[k]
		each(k, func(i int) {
			if i > 0 && !strings.ContainsRune(" \t\n'\"", rune(t[i-1])) {
				return // part of a longer word or flag
			}
			rest := i + len(flag)
			if m := userValueRE.FindStringSubmatchIndex(window(t, rest, 1100)); m != nil {
				if v := t[rest+m[2] : rest+m[3]]; !placeholder(v) {
					f.add(rest+m[2], rest+m[3], "cli_credentials")
				}
			}
		})
	}
	for k := litMysql; k < litMysql+2; k++ {
		prog := structureLits[k]
		each(k, func(i int) {
			rest := i + len(prog)
			if m := mysqlPassRE.FindStringSubmatchIndex(window(t, rest, 1100)); m != nil {
				if v := t[rest+m[2] : rest+m[3]]; len(v) >= 4 && !placeholder(v) {
					f.add(rest+m[2], rest+m[3], "cli_credentials")
				}
			}
		})
	}
	each(litSshpass, func(i int) {
		rest := i + len("sshpass")
		if m := sshpassRE.FindStringSubmatchIndex(window(t, rest, 600)); m != nil {
			if v := t[rest+m[2] : rest+m[3]]; !placeholder(v) {
				f.add(rest+m[2], rest+m[3], "cli_credentials")
			}
		}
	})
	each(litParen, func(i int) {
		j := i + 1
		for j < len(t) && (t[j] == ' ' || t[j] == '\t') {
			j++
		}
		if j >= len(t) || (t[j] != '"' && t[j] != '\'') {
			return
		}
		m := defaultArgRE.FindStringSubmatchIndex(window(t, i, 700))
		if m == nil || keyKindOf(t[i+m[2]:i+m[3]]) == kindNone {
			return
		}
		if v := t[i+m[4] : i+m[5]]; plausibleValue(v, true, kindToken) {
			f.add(i+m[4], i+m[5], "assignment")
		}
	})
	each(litAzure, func(i int) { f.azureSecretAt(i) })
	if strings.Count(t, ":") >= 4 {
		f.pgpassLines()
	}
	each(litTwilio, func(i int) {
		if i > 0 && isAlnum(t[i-1]) || !isHexID(window(t, i+2, 33)) {
			return
		}
		lo, hi := max(0, i-200), min(len(t), i+34+200)
		for _, m := range hex32RE.FindAllStringIndex(t[lo:hi], -1) {
			if s := lo + m[0]; s != i+2 {
				f.add(s, lo+m[1], "paired_secret")
			}
		}
	})
}

// isHexID reports 32 lowercase hex digits not followed by another
// letter or digit.
func isHexID(w string) bool {
	if len(w) < 32 {
		return false
	}
	for i := 0; i < 32; i++ {
		if !isDigit(w[i]) && (w[i] < 'a' || w[i] > 'f') {
			return false
		}
	}
	return len(w) == 32 || !isAlnum(w[32])
}

// azureSecretAt finds a Microsoft Entra (Azure AD) client secret around
// the "Q~" at i: three characters and a digit before it, 31 to 34 after
// (gitleaks' azure-ad-client-secret), standing alone.
func (f *finder) azureSecretAt(i int) {
	t := f.text
	s := i - 4
	if s < 0 || !isDigit(t[i-1]) {
		return
	}
	for k := s; k < i-1; k++ {
		if !isAzureChar(t[k]) {
			return
		}
	}
	if s > 0 && isAzureChar(t[s-1]) {
		return
	}
	e := i + 2
	for e < len(t) && (isAzureChar(t[e]) || t[e] == '-') {
		e++
	}
	for e > i+2 && t[e-1] == '.' { // a sentence's full stop
		e--
	}
	if n := e - (i + 2); n < 31 || n > 34 {
		return
	}
	f.add(s, e, "azure_client_secret")
}

func isAzureChar(c byte) bool { return isAlnum(c) || c == '_' || c == '~' || c == '.' }

// pgpassLines finds the password of .pgpass lines
// (hostname:port:database:username:password, PostgreSQL's password file):
// five fields on a line of their own, the port a number or *, the host a
// name, an address or *. The password is the rest of the line (a ':' in
// it is written \:).
func (f *finder) pgpassLines() {
	t := f.text
	for ls := 0; ls < len(t); {
		le := strings.IndexByte(t[ls:], '\n')
		if le < 0 {
			le = len(t)
		} else {
			le += ls
		}
		if s, e, ok := pgpassPassword(t[ls:le]); ok {
			f.add(ls+s, ls+e, "pgpass")
		}
		ls = le + 1
	}
}

// pgpassPassword returns where the password of a .pgpass line is.
func pgpassPassword(line string) (int, int, bool) {
	line = strings.TrimRight(line, "\r")
	var cuts []int
	for i := 0; i < len(line) && len(cuts) < 4; i++ {
		switch line[i] {
		case '\\':
			i++
		case ':':
			cuts = append(cuts, i)
		case ' ', '\t':
			if len(cuts) < 4 {
				return 0, 0, false // fields before the password have no spaces
			}
		}
	}
	if len(cuts) < 4 {
		return 0, 0, false
	}
	host, port := line[:cuts[0]], line[cuts[0]+1:cuts[1]]
	db, user := line[cuts[1]+1:cuts[2]], line[cuts[2]+1:cuts[3]]
	pw := line[cuts[3]+1:]
	if host == "" || db == "" || user == "" || len(pw) < 4 || strings.ContainsAny(pw, " \t") {
		return 0, 0, false
	}
	if port != "*" && (!allDigits(port) || len(port) > 5) {
		return 0, 0, false
	}
	if host != "*" && !isHostName(host) {
		return 0, 0, false
	}
	if placeholder(pw) {
		return 0, 0, false
	}
	return cuts[3] + 1, len(line), true
}

// isHostName reports a host name or an IPv4 address with a letter or a
// dot in it (not a number, not a time).
func isHostName(h string) bool {
	dotOrLetter := false
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case isLetter(c), c == '.':
			dotOrLetter = true
		case isDigit(c), c == '-', c == '_':
		default:
			return false
		}
	}
	return dotOrLetter
}
