package hooks

import (
	"fmt"
	"strings"
	"testing"
)

// covered reports whether the findings cover every byte of every
// occurrence of secret in text: a partial redaction is a miss.
func covered(found []Finding, text, secret string) bool {
	if secret == "" {
		return false
	}
	for off := 0; ; {
		i := strings.Index(text[off:], secret)
		if i < 0 {
			return true
		}
		start, end := off+i, off+i+len(secret)
		pos := start
		for _, f := range found {
			if f.Start <= pos && f.End > pos {
				pos = f.End
			}
		}
		if pos < end {
			return false
		}
		off = start + 1
	}
}

// TestScrubberUnseenCorpus measures the scrubber on testdata/scrub_unseen.yaml,
// a corpus in the formats of public secret-detector fixtures that the
// detectors were not tuned on when it was written. It reports recall and
// precision per class; targets: 100% recall on every keyword and format
// class, at least 97% recall and 97% precision overall, and no partial
// redaction (a secret counts as found only when all of it is covered).
func TestScrubberUnseenCorpus(t *testing.T) {
	c := loadCorpusFile(t, "testdata/scrub_unseen.yaml")
	classes := map[string]bool{}
	for _, e := range c.Secrets {
		classes[e.Class] = true
	}
	if len(c.Secrets) < 100 || len(classes) < 30 || len(c.Lookalikes) < 100 {
		t.Fatalf("corpus has %d secrets in %d classes and %d look-alikes; want 100, 30 and 100", len(c.Secrets), len(classes), len(c.Lookalikes))
	}
	s := defaultScrubber(t)
	type tally struct{ n, tp, fp, lookalikes int }
	per := map[string]*tally{}
	get := func(cl string) *tally {
		if per[cl] == nil {
			per[cl] = &tally{}
		}
		return per[cl]
	}
	tp, fp := 0, 0
	for i, e := range c.Secrets {
		if !strings.Contains(e.Text, e.Secret) {
			t.Fatalf("secrets[%d]: the secret is not in the text", i)
		}
		r := get(e.Class)
		r.n++
		found := s.Find(e.Text)
		if covered(found, e.Text, e.Secret) {
			r.tp++
			tp++
		} else {
			out, _ := s.Scrub(e.Text)
			t.Logf("MISSED secrets[%d] (%s): %q\n  scrubbed: %q", i, e.Class, e.Secret, out)
		}
	}
	for i, e := range c.Lookalikes {
		r := get(e.Class)
		r.lookalikes++
		if found := s.Find(e.Text); len(found) > 0 {
			r.fp++
			fp++
			out, _ := s.Scrub(e.Text)
			t.Logf("FALSE POSITIVE lookalikes[%d] (%s): %v\n  in: %q\n  out: %q", i, e.Class, found, e.Text, out)
		}
	}
	var report strings.Builder
	fmt.Fprintf(&report, "%-24s %8s %10s %10s %10s\n", "class", "secrets", "recall", "look-alike", "precision")
	keywordMissed := false
	for _, cl := range sortedKeys(per) {
		r := per[cl]
		rec, prec := "-", "-"
		if r.n > 0 {
			rec = fmt.Sprintf("%5.1f%%", 100*float64(r.tp)/float64(r.n))
			if cl != ClassHighEntropy && r.tp != r.n {
				keywordMissed = true
			}
		}
		if r.tp+r.fp > 0 {
			prec = fmt.Sprintf("%5.1f%%", 100*float64(r.tp)/float64(r.tp+r.fp))
		} else if r.fp == 0 && r.lookalikes > 0 {
			prec = "no FP"
		}
		fmt.Fprintf(&report, "%-24s %8d %10s %6d/%-3d %10s\n", cl, r.n, rec, r.fp, r.lookalikes, prec)
	}
	recall := float64(tp) / float64(len(c.Secrets))
	precision := float64(tp) / float64(max(tp+fp, 1))
	fmt.Fprintf(&report, "overall: recall %.1f%% (%d/%d), precision %.1f%% (%d false positives of %d look-alikes)\n",
		100*recall, tp, len(c.Secrets), 100*precision, fp, len(c.Lookalikes))
	t.Log("\n" + report.String())
	if keywordMissed {
		t.Errorf("a keyword or format class is below 100%% recall")
	}
	if recall < 0.97 {
		t.Errorf("overall recall %.1f%% < 97%%", 100*recall)
	}
	if precision < 0.97 {
		t.Errorf("precision %.1f%% < 97%%", 100*precision)
	}
}
