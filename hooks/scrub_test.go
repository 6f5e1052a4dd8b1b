package hooks

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

type corpusEntry struct {
	Class  string `yaml:"class"`
	Text   string `yaml:"text"`
	Secret string `yaml:"secret"`
	Note   string `yaml:"note"`
}

type corpus struct {
	Secrets    []corpusEntry `yaml:"secrets"`
	Lookalikes []corpusEntry `yaml:"lookalikes"`
}

func loadCorpus(t testing.TB) corpus { return loadCorpusFile(t, "testdata/scrub_corpus.yaml") }

func loadCorpusFile(t testing.TB, path string) corpus {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c corpus
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

func defaultScrubber(t testing.TB) *Scrubber {
	t.Helper()
	s, err := NewScrubber(ScrubberConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestScrubberCorpus measures the scrubber on the corpus: recall per secret
// class, false positives per look-alike class, and overall precision.
// Targets: recall 100% on every keyword/format class, at least 95% overall,
// precision at least 95%.
func TestScrubberCorpus(t *testing.T) {
	c := loadCorpus(t)
	if len(c.Secrets) < 50 || len(c.Lookalikes) < 50 {
		t.Fatalf("corpus has %d secrets and %d look-alikes; want at least 50 of each", len(c.Secrets), len(c.Lookalikes))
	}
	s := defaultScrubber(t)
	type tally struct{ n, hit int }
	recall := map[string]*tally{}
	fps := map[string]*tally{}
	tp, fp := 0, 0
	for i, e := range c.Secrets {
		if !strings.Contains(e.Text, e.Secret) {
			t.Fatalf("secrets[%d]: the secret is not in the text", i)
		}
		out, n := s.Scrub(e.Text)
		r := recall[e.Class]
		if r == nil {
			r = &tally{}
			recall[e.Class] = r
		}
		r.n++
		if n > 0 && !strings.Contains(out, e.Secret) && !leaksPart(out, e.Secret) {
			r.hit++
			tp++
		} else {
			t.Logf("MISSED secrets[%d] (%s): %q\n  scrubbed: %q", i, e.Class, e.Secret, out)
		}
	}
	for i, e := range c.Lookalikes {
		out, n := s.Scrub(e.Text)
		r := fps[e.Class]
		if r == nil {
			r = &tally{}
			fps[e.Class] = r
		}
		r.n++
		if n > 0 {
			r.hit++
			fp++
			t.Logf("FALSE POSITIVE lookalikes[%d] (%s): %v\n  in: %q\n  out: %q", i, e.Class, s.Find(e.Text), e.Text, out)
		}
		if n == 0 && out != e.Text {
			t.Errorf("lookalikes[%d]: changed without a finding", i)
		}
	}
	var report strings.Builder
	fmt.Fprintf(&report, "recall by class:\n")
	keywordMissed := false
	for _, cl := range sortedKeys(recall) {
		r := recall[cl]
		fmt.Fprintf(&report, "  %-20s %2d/%-2d %6.1f%%\n", cl, r.hit, r.n, 100*float64(r.hit)/float64(r.n))
		if cl != ClassHighEntropy && r.hit != r.n {
			keywordMissed = true
		}
	}
	fmt.Fprintf(&report, "false positives by look-alike class:\n")
	for _, cl := range sortedKeys(fps) {
		r := fps[cl]
		fmt.Fprintf(&report, "  %-20s %2d/%-2d\n", cl, r.hit, r.n)
	}
	overallRecall := float64(tp) / float64(len(c.Secrets))
	precision := float64(tp) / float64(tp+fp)
	fmt.Fprintf(&report, "overall: recall %.1f%% (%d/%d), precision %.1f%% (%d true, %d false positives of %d look-alikes)\n",
		100*overallRecall, tp, len(c.Secrets), 100*precision, tp, fp, len(c.Lookalikes))
	t.Log("\n" + report.String())
	if keywordMissed {
		t.Errorf("a keyword or format class is below 100%% recall")
	}
	if overallRecall < 0.95 {
		t.Errorf("overall recall %.1f%% < 95%%", 100*overallRecall)
	}
	if precision < 0.95 {
		t.Errorf("precision %.1f%% < 95%%", 100*precision)
	}
}

// leaksPart reports whether out still holds 12 or more consecutive
// characters of the secret (a partial redaction).
func leaksPart(out, secret string) bool {
	const n = 12
	for i := 0; i+n <= len(secret); i++ {
		if strings.Contains(out, secret[i:i+n]) {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestScrubberKeywordClassesAlone: the keyword and format detectors reach
// 100% recall on their classes without the entropy detector's help.
func TestScrubberKeywordClassesAlone(t *testing.T) {
	off := false
	s, err := NewScrubber(ScrubberConfig{HighEntropy: &off})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range loadCorpus(t).Secrets {
		if e.Class == ClassHighEntropy {
			continue
		}
		out, _ := s.Scrub(e.Text)
		if strings.Contains(out, e.Secret) || leaksPart(out, e.Secret) {
			t.Errorf("secrets[%d] (%s) survives without entropy detection: %q", i, e.Class, out)
		}
	}
}

// TestScrubberCorpusExact: on the corpus the scrubber replaces the secret
// and nothing else for most entries; the rest may take a few neighbouring
// characters along. It reports the share, and every output is a fixed point.
func TestScrubberCorpusExact(t *testing.T) {
	s := defaultScrubber(t)
	exact := 0
	c := loadCorpus(t)
	for i, e := range c.Secrets {
		out, _ := s.Scrub(e.Text)
		marker := Redacted
		if e.Class == ClassHighEntropy {
			marker = RedactedHighEntropy
		}
		if out == strings.Replace(e.Text, e.Secret, marker, 1) {
			exact++
		} else {
			t.Logf("secrets[%d] (%s) not exact: %q", i, e.Class, out)
		}
		if again, n := s.Scrub(out); again != out || n != 0 {
			t.Errorf("secrets[%d]: scrubbing twice changes the output: %q -> %q", i, out, again)
		}
	}
	t.Logf("exact replacements: %d/%d", exact, len(c.Secrets))
}

func TestScrubberCases(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  ScrubberConfig
		in   string
		want string
	}{
		{"placeholder variables", ScrubberConfig{}, "password: ${DB_PASSWORD}\ntoken=$TOKEN\napi_key: <your key>", "password: ${DB_PASSWORD}\ntoken=$TOKEN\napi_key: <your key>"},
		{"numbers are not tokens", ScrubberConfig{}, "max_tokens: 4096\ntoken: 12345", "max_tokens: 4096\ntoken: 12345"},
		{"but can be passwords", ScrubberConfig{}, "password: 123456", "password: [REDACTED]"},
		{"prose is not a value", ScrubberConfig{}, `"token": "the token sent by the server"`, `"token": "the token sent by the server"`},
		{"JSON stays JSON", ScrubberConfig{}, `{"password":"hunter2!","user":"ada"}`, `{"password":"[REDACTED]","user":"ada"}`},
		{"CLI flag", ScrubberConfig{}, "mysql --password hunter22 -u root", "mysql --password [REDACTED] -u root"},
		{"camelCase key", ScrubberConfig{}, "clientSecret: 'abcd1234efgh'", "clientSecret: '[REDACTED]'"},
		{"auth needs a boundary", ScrubberConfig{}, "oauth: enabled-by-default\nnpm_auth=dXNlcjpwYXNz", "oauth: enabled-by-default\nnpm_auth=[REDACTED]"},
		{"truncated private key", ScrubberConfig{}, "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg", "[REDACTED]"},
		{"certificate is public", ScrubberConfig{}, "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n-----END CERTIFICATE-----", "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n-----END CERTIFICATE-----"},
		{"high entropy marker", ScrubberConfig{}, "code 9xQ2mK7vL4pR8sT1wZ6yB3nC5dF0gH", "code [REDACTED:high-entropy]"},
		{"high entropy off", ScrubberConfig{HighEntropy: new(bool)}, "code 9xQ2mK7vL4pR8sT1wZ6yB3nC5dF0gH", "code 9xQ2mK7vL4pR8sT1wZ6yB3nC5dF0gH"},
		{"extra pattern group", ScrubberConfig{ExtraPatterns: []string{`corp-id=(\w+)`}}, "corp-id=ab12 ok", "corp-id=[REDACTED] ok"},
		{"extra pattern whole", ScrubberConfig{ExtraPatterns: []string{`ACME-[0-9]{6}`}}, "badge ACME-123456.", "badge [REDACTED]."},
		{"allow pattern", ScrubberConfig{AllowPatterns: []string{`AKIAIOSFODNN7EXAMPLE`}}, "docs: AKIAIOSFODNN7EXAMPLE, real: AKIA6PYCDYBK155OXTZ7", "docs: AKIAIOSFODNN7EXAMPLE, real: [REDACTED]"},
		{"overlapping findings merge", ScrubberConfig{}, "OPENAI_API_KEY=sk-96hExzIpIQftca4svm9zWxNV31eSjE8hlafb0tCYm89cZWHU", "OPENAI_API_KEY=[REDACTED]"},
		{"nothing to do", ScrubberConfig{}, "hello, world", "hello, world"},
		{"empty", ScrubberConfig{}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewScrubber(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := s.Scrub(tc.in); got != tc.want {
				t.Fatalf("Scrub(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

// FuzzScrub: the scrubber never panics; one pass keeps the input's text in
// order and replaces only findings, each by one marker, so the output is
// never longer than needed; Scrub's output is a fixed point; valid UTF-8
// stays valid.
func FuzzScrub(f *testing.F) {
	for _, e := range loadCorpus(f).Secrets {
		f.Add(e.Text)
	}
	for _, e := range loadCorpus(f).Lookalikes {
		f.Add(e.Text)
	}
	f.Add("password: \"unterminated")
	f.Add("-----BEGIN PRIVATE KEY-----")
	f.Add("x://a:b@")
	f.Add("Bearer ")
	s := defaultScrubber(f)
	f.Fuzz(func(t *testing.T, in string) {
		found := s.Find(in)
		prev := 0
		for _, x := range found {
			if x.Start < prev || x.End <= x.Start || x.End > len(in) {
				t.Fatalf("bad finding %+v after %d in %q", x, prev, in)
			}
			prev = x.End
		}
		out, _ := replace(in, found, false)
		n := len(found)
		// Rebuild: the kept text is exactly the input outside the findings.
		var kept strings.Builder
		at := 0
		for _, x := range found {
			kept.WriteString(in[at:x.Start])
			at = x.End
		}
		kept.WriteString(in[at:])
		stripped := strings.ReplaceAll(strings.ReplaceAll(out, RedactedHighEntropy, ""), Redacted, "")
		if n == 0 && out != in {
			t.Fatalf("no finding, but the output differs")
		}
		if n > 0 && stripped != kept.String() && !strings.Contains(in, "[REDACTED") {
			t.Fatalf("the output is not the input with findings replaced:\n in %q\nout %q", in, out)
		}
		if maxLen := len(in) - n + n*len(RedactedHighEntropy); len(out) > maxLen {
			t.Fatalf("output %d bytes, more than %d", len(out), maxLen)
		}
		if utf8.ValidString(in) && !utf8.ValidString(out) {
			t.Fatalf("valid UTF-8 became invalid: %q", out)
		}
		full, _ := s.Scrub(in)
		if again := s.Find(full); len(again) > 0 {
			t.Fatalf("not a fixed point: %q\nstill has %v", full, again)
		}
	})
}

func FuzzTruncateMiddle(f *testing.F) {
	f.Add("hello, wörld, this is long", 5, 5)
	f.Add(strings.Repeat("é", 40), 3, 3)
	f.Fuzz(func(t *testing.T, s string, head, tail int) {
		head, tail = head%1000, tail%1000
		out, cut := TruncateMiddle(s, head, tail, "fuzz")
		if !cut {
			if out != s {
				t.Fatal("uncut output differs")
			}
			return
		}
		i := strings.Index(out, "\n[... ")
		j := strings.LastIndex(out, " ...]\n")
		if i < 0 || j < 0 || !strings.HasPrefix(s, out[:i]) || !strings.HasSuffix(s, out[j+len(" ...]\n"):]) {
			t.Fatalf("TruncateMiddle(%q, %d, %d) = %q", s, head, tail, out)
		}
		if i > max(head, 0) || len(out)-j-len(" ...]\n") > max(tail, 0) {
			t.Fatalf("kept more than asked: %q", out)
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8: %q", out)
		}
	})
}

// TestScrubberHostileInputs runs the hostile inputs once; a quadratic scan
// would take minutes here (BenchmarkScrubberHostile has the numbers).
func TestScrubberHostileInputs(t *testing.T) {
	s := defaultScrubber(t)
	for name, text := range hostileInputs() {
		t.Run(name, func(t *testing.T) {
			out, _ := s.Scrub(text)
			if found := s.Find(out); len(found) > 0 {
				t.Fatalf("the output still has %d findings", len(found))
			}
		})
	}
}
