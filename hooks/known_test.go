package hooks

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
)

// key is a secret no detector finds on its own: short for the entropy
// detector, in no known format, not after a credential keyword.
const key = "gw-7Hq2ZpL0vX9mKe4R"

func TestKnownSecrets(t *testing.T) {
	var k KnownSecrets
	if k.Add("ollama") || k.Add("   ") || k.Len() != 0 {
		t.Fatal("a word was taken for a secret")
	}
	if !k.Add(" "+key+"\n") || !k.Add(key) || k.Len() != 1 {
		t.Fatalf("Add: %d values", k.Len())
	}
	s, err := NewScrubber(ScrubberConfig{Known: &k, AllowPatterns: []string{`provided: \S+`}})
	if err != nil {
		t.Fatal(err)
	}
	plain := defaultScrubber(t)
	for _, text := range []string{
		"Incorrect API key provided: " + key + ". You can find your API key at https://platform.openai.com/account/api-keys.",
		"curl -H 'x-gw: " + key + "' http://gw.local",
		"the key is" + key + "and more", // inside a longer token
		key,
	} {
		if out, _ := plain.Scrub(text); !strings.Contains(out, key) {
			t.Fatalf("the default detectors already find %q: the test proves nothing", text)
		}
		out, n := s.Scrub(text)
		if strings.Contains(out, key) || n < 1 || !strings.Contains(out, Redacted) {
			t.Errorf("Scrub(%q) = %q, %d", text, out, n)
		}
		if again, _ := s.Scrub(out); again != out {
			t.Errorf("scrubbed text does not scrub to itself: %q -> %q", out, again)
		}
		found := s.Find(text)
		if len(found) == 0 || found[0].Class != ClassKnownSecret {
			t.Errorf("Find(%q) = %+v", text, found)
		}
	}
	// A value inside another: the longer one wins, whole.
	k.Add(key + "-extended")
	if out, _ := s.Scrub("x " + key + "-extended y"); out != "x "+Redacted+" y" {
		t.Errorf("nested values: %q", out)
	}
}

// TestKnownSecretsInToolResults: the chain redacts held secrets from tool
// results, also with the scrubber disabled by configuration.
func TestKnownSecretsInToolResults(t *testing.T) {
	var k KnownSecrets
	k.Add(key)
	for _, cfg := range []string{`{}`, `scrubber: {enabled: false}`} {
		ch, err := NewChain(parseConfig(t, cfg), Options{Known: &k})
		if err != nil {
			t.Fatal(err)
		}
		h := ch.Hook()(kernel.HandlerFunc(func(context.Context, *kernel.Call) (kernel.Result, error) {
			return kernel.Result{Content: "token file: " + key}, nil
		}))
		res, err := h.Handle(context.Background(), testCall(t))
		if err != nil || strings.Contains(res.Content, key) {
			t.Errorf("%s: %q, %v", cfg, res.Content, err)
		}
		if got := ch.Scrub("log line " + key); strings.Contains(got, key) {
			t.Errorf("%s: Chain.Scrub = %q", cfg, got)
		}
	}
}

// TestKnownSecretsHammer adds secrets while scrubbers read them.
func TestKnownSecretsHammer(t *testing.T) {
	var k KnownSecrets
	s, err := NewScrubber(ScrubberConfig{Known: &k})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				v := fmt.Sprintf("secret-%d-%04d-value", w, i)
				k.Add(v)
				if out, _ := s.Scrub("a " + v + " b"); strings.Contains(out, v) {
					t.Errorf("%q kept %q", out, v)
					return
				}
			}
		}()
	}
	wg.Wait()
	if k.Len() != 800 {
		t.Fatalf("%d values", k.Len())
	}
}
