package unidiff_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/unidiff"
)

// gnuDiff is what `diff -u` prints for a → b under the labels.
func gnuDiff(t *testing.T, from, to, a, b string) string {
	t.Helper()
	dir := t.TempDir()
	pa, pb := filepath.Join(dir, "old"), filepath.Join(dir, "new")
	if from == "/dev/null" {
		pa = "/dev/null"
	} else if err := os.WriteFile(pa, []byte(a), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pb, []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("diff", "-u", "--label", from, "--label", to, pa, pb).Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		t.Fatalf("diff: %v", err)
	}
	return string(out)
}

// applies checks that `patch -p1 --dry-run` accepts the diff against a
// file holding a (none when a is new), then that patch turns it into b.
func applies(t *testing.T, diff, a, b string, created bool) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	if !created {
		if err := os.WriteFile(file, []byte(a), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"-p1", "--dry-run"}, {"-p1"}} {
		cmd := exec.Command("patch", append(args, "--batch", "--quiet")...)
		cmd.Dir, cmd.Stdin = dir, strings.NewReader(diff)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("patch %v rejects the diff: %v\n%s\ndiff:\n%s", args, err, out, diff)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != b {
		t.Fatalf("patch made %q, want %q", got, b)
	}
}

func TestDiffIsDiffU(t *testing.T) {
	four := "one\ntwo\nthree\nfour\n"
	long := ""
	for i := range 20 {
		long += strings.Repeat("x", i) + "\n"
	}
	cases := []struct {
		name string
		a, b string
		new  bool
	}{
		{"new file", "", four, true},
		{"new file without a final newline", "", "one\ntwo", true},
		{"append at the end", four, four + "five\n", false},
		{"append a blank line and a line", four, four + "\nfive\n", false},
		{"insert before the last line", four, "one\ntwo\nthree\n\nfour\n", false},
		{"append to a file without a final newline", "one\ntwo", "one\ntwo\nthree\n", false},
		{"change the last line, no final newline", "one\ntwo", "one\nTWO", false},
		{"remove the final newline", four, strings.TrimSuffix(four, "\n"), false},
		{"add the final newline", strings.TrimSuffix(four, "\n"), four, false},
		{"context line without a final newline", "one\ntwo\nthree", "ONE\ntwo\nthree", false},
		{"CRLF file", "a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\n", false},
		{"CRLF file, append", "a\r\nb\r\n", "a\r\nb\r\nc\r\n", false},
		{"emptied file", four, "", false},
		{"one line to empty", "x\n", "", false},
		{"empty to one line", "", "x\n", false},
		{"changes 6 lines apart share a hunk", long, strings.Replace(strings.Replace(long, "xx\n", "XX\n", 1), "xxxxxxxxx\n", "X\n", 1), false},
		{"changes 7 lines apart make two hunks", long, strings.Replace(strings.Replace(long, "xx\n", "XX\n", 1), "xxxxxxxxxx\n", "X\n", 1), false},
		{"a duplicated block", "}\n\nfunc a() {\n}\n", "}\n\nfunc b() {\n}\n\nfunc a() {\n}\n", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			from := "a/f.txt"
			if c.new {
				from = "/dev/null"
			}
			got, err := unidiff.Diff(from, "b/f.txt", c.a, c.b)
			if err != nil {
				t.Fatal(err)
			}
			if want := gnuDiff(t, from, "b/f.txt", c.a, c.b); got != want {
				t.Fatalf("unidiff:\n%s\ndiff -u:\n%s", got, want)
			}
			applies(t, got, c.a, c.b, c.new)
		})
	}
}

func TestDiffEqual(t *testing.T) {
	if got, err := unidiff.Diff("a/x", "b/x", "same\n", "same\n"); got != "" || err != nil {
		t.Fatalf("Diff of equal texts = %q, %v; want nothing", got, err)
	}
}

// TestDiffRandomIsDiffU holds the choice among shortest scripts to
// diff's: small alphabets make many equally short scripts, and every
// one printed must be diff's, byte for byte.
func TestDiffRandomIsDiffU(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	line := func(alpha int) string { return string(rune('a'+r.IntN(alpha))) + "\n" }
	for i := range 300 {
		alpha, size := 2+r.IntN(24), 1+r.IntN(200)
		var a []string
		for range r.IntN(size) {
			a = append(a, line(alpha))
		}
		b := slices(a)
		for range 1 + r.IntN(8) {
			p := r.IntN(len(b) + 1)
			switch r.IntN(3) {
			case 0:
				if p < len(b) {
					b = append(b[:p], b[p+1:]...)
				}
			case 1:
				b = append(b[:p], append([]string{line(alpha)}, b[p:]...)...)
			default:
				if p < len(b) {
					b[p] = line(alpha)
				}
			}
		}
		ta, tb := strings.Join(a, ""), strings.Join(b, "")
		if r.IntN(4) == 0 {
			ta = strings.TrimSuffix(ta, "\n")
		}
		if r.IntN(4) == 0 {
			tb = strings.TrimSuffix(tb, "\n")
		}
		got, err := unidiff.Diff("a/f.txt", "b/f.txt", ta, tb)
		if err != nil {
			t.Fatal(err)
		}
		if want := gnuDiff(t, "a/f.txt", "b/f.txt", ta, tb); got != want {
			t.Fatalf("case %d: a=%q b=%q\nunidiff:\n%s\ndiff -u:\n%s", i, ta, tb, got, want)
		}
		if i%10 == 0 {
			applies(t, got, ta, tb, false)
		}
	}
}

func slices(s []string) []string { return append([]string(nil), s...) }

// TestDiffTooCostly: past the work bound Diff gives up instead of
// printing a diff that is not diff's.
func TestDiffTooCostly(t *testing.T) {
	var a, b bytes.Buffer
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		a.WriteString(strings.Repeat("a", r.IntN(3)) + "\n")
		b.WriteString(strings.Repeat("a", r.IntN(3)) + "\n")
	}
	if _, err := unidiff.DiffWork("a/x", "b/x", a.String(), b.String(), 1000); !errors.Is(err, unidiff.ErrTooCostly) {
		t.Fatalf("err = %v, want ErrTooCostly", err)
	}
	if _, err := unidiff.Diff("a/x", "b/x", a.String(), b.String()); err != nil {
		t.Fatalf("within the default bound: %v", err)
	}
}

func BenchmarkDiff(b *testing.B) {
	var old strings.Builder
	for i := range 5000 {
		old.WriteString(strings.Repeat("line ", i%13) + "\n")
	}
	edited := strings.Replace(old.String(), "line line line \n", "changed\n", 40)
	for b.Loop() {
		if _, err := unidiff.Diff("a/x", "b/x", old.String(), edited); err != nil {
			b.Fatal(err)
		}
	}
}
