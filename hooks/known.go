package hooks

import (
	"slices"
	"strings"
	"sync"
)

// ClassKnownSecret is the Finding class of a value registered in
// KnownSecrets.
const ClassKnownSecret = "known_secret"

// MinKnownSecret is the shortest value KnownSecrets takes: a shorter one
// ("ollama", "EMPTY", what local servers are given as a key) is a word,
// not a secret, and redacting it everywhere would mangle the text.
const MinKnownSecret = 8

// KnownSecrets is the set of exact secret values the process holds: the
// API keys it read from the environment, the tokens of MCP servers, the
// keys of a server it runs. A Scrubber built with it redacts each of them
// wherever it appears, before its detectors run and whatever they would
// make of the text around it, even when the scrubber is disabled for tool
// results. Values can be added while scrubbers use it. The zero value is
// empty and ready; a KnownSecrets is safe for concurrent use.
//
// Why: RATIONALE.md, "Known secrets first".
type KnownSecrets struct {
	mu   sync.RWMutex
	vals []string // longest first, so a value inside another is not split
}

// Add registers v. It reports false, and registers nothing, for a value
// shorter than MinKnownSecret (after trimming spaces, which a secret read
// from a file or the environment may carry).
func (k *KnownSecrets) Add(v string) bool {
	v = strings.TrimSpace(v)
	if len(v) < MinKnownSecret {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if slices.Contains(k.vals, v) {
		return true
	}
	k.vals = append(k.vals, v)
	slices.SortStableFunc(k.vals, func(a, b string) int { return len(b) - len(a) })
	return true
}

// Len is the number of values registered.
func (k *KnownSecrets) Len() int {
	if k == nil {
		return 0
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	return len(k.vals)
}

// find returns where the registered values occur in text, sorted and
// disjoint (a longer value wins over one inside it).
func (k *KnownSecrets) find(text string) []Finding {
	if k == nil {
		return nil
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	var out []Finding
	for _, v := range k.vals {
		for at := 0; ; {
			i := strings.Index(text[at:], v)
			if i < 0 {
				break
			}
			s := at + i
			out = append(out, Finding{Start: s, End: s + len(v), Class: ClassKnownSecret})
			at = s + len(v)
		}
	}
	if len(out) < 2 {
		return out
	}
	slices.SortFunc(out, func(a, b Finding) int { return a.Start - b.Start })
	return merge(out)
}
