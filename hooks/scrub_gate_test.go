package hooks

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// gateTexts are the texts the gate is held to: every corpus text, the
// structure literals' texts, and random texts built from findings that
// stand at each gate's edge (a 24-byte token, one with '=' padding, an
// XML, a flag, a URL and a PEM credential, each without the other gates'
// bytes) and noise.
func gateTexts(t testing.TB) []string {
	var out []string
	for _, path := range []string{"testdata/scrub_corpus.yaml", "testdata/scrub_families.yaml", "testdata/scrub_holdout.yaml", "testdata/scrub_unseen.yaml"} {
		c := loadCorpusFile(t, path)
		for _, e := range append(c.Secrets, c.Lookalikes...) {
			out = append(out, e.Text)
		}
	}
	out = append(out, litTexts()...)
	frags := []string{
		"Zk3lQ9xBv7Tn2Wq8Rf5Yh1Mp", "Zk3lQ9xBv7Tn2Wq8Rf5Yh1M=", "Zk3lQ9xBv7Tn2Wq8Rf5Yh1M", // 24, 23+'=', 23
		"<password>S3cretValue9x</password>", "--password hunter2222x", "password: Hunter2Secret", "api_key=Zx8vQ2mP9rT4",
		"token => 'abcDEF123456789'", "https://bob:S3cr3tPass@db.example.com/x",
		"-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "AKIAW2SPHUJ2D7ZZQ5L6", "xoxb-1234567890",
		"the ", " ", "\n", ":", "=", ">", "<", "-", "what is in the workspace?", "package main", "é", "\x00",
	}
	r := rand.New(rand.NewPCG(45, 8))
	for range 4000 {
		var b strings.Builder
		for range 1 + r.IntN(6) {
			b.WriteString(frags[r.IntN(len(frags))])
			if r.IntN(2) == 0 {
				b.WriteString(" ")
			}
		}
		out = append(out, b.String())
	}
	return append(out, frags...)
}

// TestGateChangesNothing: detect with the gate (shapeOf) finds exactly
// what running every detector finds (allShape), with and without the
// entropy detector.
func TestGateChangesNothing(t *testing.T) {
	on := defaultScrubber(t)
	off := false
	noEntropy, err := NewScrubber(ScrubberConfig{HighEntropy: &off})
	if err != nil {
		t.Fatal(err)
	}
	texts := gateTexts(t)
	found, skipped := 0, 0
	for _, s := range []*Scrubber{on, noEntropy} {
		for _, text := range texts {
			sh := shapeOf(text)
			gated, all := s.detectShaped(text, sh), s.detectShaped(text, allShape)
			if !reflect.DeepEqual(gated, all) {
				t.Fatalf("%q (entropy %v): gated %v, every detector %v", text, s.entropy, gated, all)
			}
			if len(all) > 0 {
				found++
			}
			if sh.has != gAll || sh.maxRun < entropyMinLen {
				skipped++
			}
		}
	}
	if found < 5000 || skipped < 1000 {
		t.Fatalf("%d texts with findings, %d with a detector skipped (the test tests less than it says)", found, skipped)
	}
}

// FuzzGate: the gate never changes the findings.
func FuzzGate(f *testing.F) {
	for _, text := range gateTexts(f)[:200] {
		f.Add(text)
	}
	s := defaultScrubber(f)
	f.Fuzz(func(t *testing.T, text string) {
		if gated, all := s.detect(text), s.detectShaped(text, allShape); !reflect.DeepEqual(gated, all) {
			t.Fatalf("%q: gated %v, every detector %v", text, gated, all)
		}
	})
}
