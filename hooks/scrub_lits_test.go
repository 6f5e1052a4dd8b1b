package hooks

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// litTexts are random texts built from the structure detectors' literals,
// credentials that stand after them, near misses and noise: short ones
// (litsIn's one pass) and some longer than shortScan.
func litTexts() []string {
	frags := []string{
		"-u admin:hunter2pass ", "--user bob:Secr3tPassw0rd", "--proxy-user p:Passw0rd123 ", "-U x:yyyyyyyyz ",
		"curl -u=me:T0ps3cret99 ", "mysql -h db -pS3cretPass\n", "mariadb -pAbcdefgh1 ", "sshpass -p 'S3cretPw9x' ssh h ",
		`os.getenv("API_TOKEN", "tok_abcdef123456") `, `get("password", "n0tAPlaceholder9")`,
		"abc8Q~" + strings.Repeat("Zx9_", 8) + " ", "AC0123456789abcdef0123456789abcdef " + "fedcba9876543210fedcba9876543210 ",
		"the ", "-", "m", "Q", "A", "(", "\n", " ", "--", "mysq", "sshpas", "Q~", "AC", "-u", "--use", "maria", "--proxy",
		"what is in the workspace?", "package main", "é", "\x00",
	}
	r := rand.New(rand.NewPCG(45, 5))
	var out []string
	for range 3000 {
		var b strings.Builder
		n := 1 + r.IntN(12)
		if r.IntN(20) == 0 {
			n = 40 + r.IntN(40) // past shortScan
		}
		for range n {
			b.WriteString(frags[r.IntN(len(frags))])
		}
		out = append(out, b.String())
	}
	return append(out, "", "-", "A", "Q~", "AC", strings.Repeat("x", shortScan), strings.Repeat("x", shortScan)+"-u")
}

// TestLitsInIsContains: litsIn says a literal occurs exactly when
// strings.Contains finds it (every literal for a text past shortScan).
func TestLitsInIsContains(t *testing.T) {
	long := 0
	for _, text := range litTexts() {
		has := litsIn(text)
		if len(text) > shortScan {
			long++
			if has != allLits {
				t.Fatalf("a text of %d bytes: litsIn = %b, want every literal", len(text), has)
			}
			continue
		}
		for k, lit := range structureLits {
			if got, want := has&(1<<k) != 0, strings.Contains(text, lit); got != want {
				t.Fatalf("%q: litsIn says %q occurs = %v, strings.Contains %v", text, lit, got, want)
			}
		}
	}
	if long == 0 {
		t.Fatal("no text past shortScan (the test tests less than it says)")
	}
}

// TestStructuresGateChangesNothing: the structure detectors find the same
// credentials, in the same order, searching only the literals litsIn
// found as searching every one.
func TestStructuresGateChangesNothing(t *testing.T) {
	found := 0
	for _, text := range litTexts() {
		gated, all := finder{text: text}, finder{text: text}
		gated.structuresIn(litsIn(text))
		all.structuresIn(allLits)
		if !reflect.DeepEqual(gated.out, all.out) {
			t.Fatalf("%q: gated %v, every literal %v", text, gated.out, all.out)
		}
		if len(all.out) > 0 {
			found++
		}
	}
	if found < 500 {
		t.Fatalf("only %d texts had structure findings (the test tests less than it says)", found)
	}
}
