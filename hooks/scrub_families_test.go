package hooks

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
)

// holdoutSHA256 freezes the held-out corpus: it was generated (go run
// ./hooks/internal/scrubcorpus -set hold) and committed before the
// scrubber was tuned on the family corpus, and is never regenerated or
// edited, so that its numbers say how the scrubber does on text it was
// not tuned on.
const holdoutSHA256 = "9b0b52db6f683cc11a1e262da77ec86499f5298bac5ce7d7068835632492c80d"

// familyScore is a corpus's tally per class.
type familyScore struct {
	n, tp      int // secrets, and those fully covered
	overReach  int // secret texts with a finding outside the secret
	lookalikes int
	fp         int // look-alike texts with any finding
}

// scoreCorpus measures s on c: a secret counts when every byte of every
// occurrence is covered; a false positive is a look-alike text with any
// finding, or a secret text with a finding that covers none of the secret
// (over-redaction). Precision is TP / (TP + FP).
func scoreCorpus(t *testing.T, s *Scrubber, c corpus, verbose bool) (map[string]*familyScore, float64, float64) {
	t.Helper()
	per := map[string]*familyScore{}
	get := func(cl string) *familyScore {
		if per[cl] == nil {
			per[cl] = &familyScore{}
		}
		return per[cl]
	}
	tp, fp, n := 0, 0, 0
	for i, e := range c.Secrets {
		if !strings.Contains(e.Text, e.Secret) {
			t.Fatalf("secrets[%d]: the secret is not in the text", i)
		}
		r := get(e.Class)
		r.n++
		n++
		found := s.Find(e.Text)
		if covered(found, e.Text, e.Secret) {
			r.tp++
			tp++
		} else if verbose {
			out, _ := s.Scrub(e.Text)
			t.Logf("MISSED secrets[%d] (%s): %q\n  scrubbed: %q", i, e.Class, e.Secret, out)
		}
		for _, f := range found {
			if !overlapsSecret(e.Text, e.Secret, f) {
				r.overReach++
				fp++
				if verbose {
					t.Logf("OVER-REDACTED secrets[%d] (%s): %q in %q", i, e.Class, e.Text[f.Start:f.End], e.Text)
				}
				break
			}
		}
	}
	for i, e := range c.Lookalikes {
		r := get(e.Class)
		r.lookalikes++
		if found := s.Find(e.Text); len(found) > 0 {
			r.fp++
			fp++
			if verbose {
				out, _ := s.Scrub(e.Text)
				t.Logf("FALSE POSITIVE lookalikes[%d] (%s): %v\n  in: %q\n  out: %q", i, e.Class, found, e.Text, out)
			}
		}
	}
	return per, float64(tp) / float64(max(n, 1)), float64(tp) / float64(max(tp+fp, 1))
}

// overlapsSecret reports whether f overlaps an occurrence of secret.
func overlapsSecret(text, secret string, f Finding) bool {
	for off := 0; ; {
		i := strings.Index(text[off:], secret)
		if i < 0 {
			return false
		}
		s, e := off+i, off+i+len(secret)
		if f.Start < e && f.End > s {
			return true
		}
		off = s + 1
	}
}

func familyTable(per map[string]*familyScore, recall, precision float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-24s %7s %8s %6s %11s\n", "family", "secrets", "recall", "over", "look-alike FP")
	for _, cl := range sortedKeys(per) {
		r := per[cl]
		rec := "-"
		if r.n > 0 {
			rec = fmt.Sprintf("%5.1f%%", 100*float64(r.tp)/float64(r.n))
		}
		la := "-"
		if r.lookalikes > 0 {
			la = fmt.Sprintf("%d/%d", r.fp, r.lookalikes)
		}
		fmt.Fprintf(&b, "%-24s %7d %8s %6d %11s\n", cl, r.n, rec, r.overReach, la)
	}
	fmt.Fprintf(&b, "overall: recall %.1f%%, precision %.1f%%\n", 100*recall, 100*precision)
	return b.String()
}

// TestScrubberFamilies measures the scrubber on the family corpus (the
// secret families of gitleaks' and trufflehog's public rule sets, each in
// the places it turns up, and hard negatives: public values that look
// like secrets) and on its held-out twin, and prints both tables. The
// goal is at least 97% recall and 97% precision on each. The tuning set
// is held to it; the held-out set is held to 95% (a regression guard:
// docs/security.md and the closing note give its measured numbers, which
// were not tuned for).
func TestScrubberFamilies(t *testing.T) {
	b, err := os.ReadFile("testdata/scrub_holdout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != holdoutSHA256 {
		t.Fatal("testdata/scrub_holdout.yaml changed: the held-out corpus is frozen (see holdoutSHA256); add cases to the tuning set instead")
	}
	s := defaultScrubber(t)
	for _, set := range []struct{ name, path string }{{"tuning set", "testdata/scrub_families.yaml"}, {"held-out set", "testdata/scrub_holdout.yaml"}} {
		c := loadCorpusFile(t, set.path)
		tuning := set.name == "tuning set"
		per, recall, precision := scoreCorpus(t, s, c, tuning)
		if tuning || os.Getenv("AK_SCRUB_HOLDOUT_TABLE") != "" {
			t.Logf("%s (%s):\n%s", set.name, set.path, familyTable(per, recall, precision))
		} else {
			// While tuning, only the totals of the held-out set are shown
			// (AK_SCRUB_HOLDOUT_TABLE=1 prints its table, for the report).
			t.Logf("%s (%s): recall %.1f%%, precision %.1f%%", set.name, set.path, 100*recall, 100*precision)
		}
		floor := 0.97
		if !tuning {
			floor = 0.95
		}
		if recall < floor || precision < floor {
			t.Errorf("%s: recall %.1f%%, precision %.1f%%; want at least %.0f%% each", set.name, 100*recall, 100*precision, 100*floor)
		}
	}
}
