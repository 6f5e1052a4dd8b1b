package anthropictest

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
)

// Cache emulates the API's prompt cache well enough to measure what the
// provider's breakpoints save. The prompt is its blocks in the API's
// order: tools, system, then each message's content blocks. A breakpoint
// (cache_control) caches the prefix that ends at its block, when the
// prefix has at least MinTokens tokens. A request reads the longest cached
// prefix that ends at one of its breakpoints or at one of the 20 blocks
// before each (the API's lookback), and writes the prefixes of its
// breakpoints past that. Tokens are estimated at four bytes a token of the
// blocks' JSON, without their cache_control. Entries never expire: a test
// runs in far less than the five minutes of the default TTL.
//
// A Cache is safe for concurrent use.
type Cache struct {
	// MinTokens is the shortest prefix cached (1024, the API's minimum for
	// Sonnet and Opus models); zero means 1024.
	MinTokens int64

	mu      sync.Mutex
	entries map[[32]byte]int64
}

// lookback is how many blocks before a breakpoint the API looks for a hit.
const lookback = 20

// Usage is what a request's prompt costs: input_tokens (not cached),
// cache_creation_input_tokens and cache_read_input_tokens, as the API
// reports them.
type Usage struct {
	Input, CacheWrite, CacheRead int64
}

// Total is every input token of the request.
func (u Usage) Total() int64 { return u.Input + u.CacheWrite + u.CacheRead }

// prompt is a request's blocks, each with its token estimate, and which
// of them carry a breakpoint.
func prompt(r *MessagesRequest) (blocks [][]byte, marks []bool) {
	add := func(role string, raw json.RawMessage, mark bool) {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) == nil {
			delete(m, "cache_control")
			raw, _ = json.Marshal(m) // sorted keys: a canonical form
		}
		blocks = append(blocks, append([]byte(role+":"), raw...))
		marks = append(marks, mark)
	}
	for _, t := range r.Tools {
		add("tool", t.Raw, t.CacheControl != nil)
	}
	for _, b := range r.System {
		add("system", b.Raw, b.CacheControl != nil)
	}
	for _, m := range r.Messages {
		for _, b := range m.Content {
			add(m.Role, b.Raw, b.CacheControl != nil)
		}
	}
	return blocks, marks
}

func tokens(n int) int64 { return int64((n + 3) / 4) }

// Use accounts one request against the cache and returns its usage.
func (c *Cache) Use(r *MessagesRequest) Usage {
	min := c.MinTokens
	if min <= 0 {
		min = 1024
	}
	blocks, marks := prompt(r)
	n := len(blocks)
	hashes := make([][32]byte, n)
	cum := make([]int64, n)
	var h [32]byte
	var sum int64
	for i, b := range blocks {
		h = sha256.Sum256(append(h[:], b...))
		hashes[i] = h
		sum += tokens(len(b))
		cum[i] = sum
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[[32]byte]int64{}
	}
	var read int64
	last := -1
	for i := range n {
		if !marks[i] {
			continue
		}
		for j := i; j >= 0 && j >= i-lookback; j-- {
			if _, ok := c.entries[hashes[j]]; ok {
				read = max(read, cum[j])
				break
			}
		}
		if cum[i] >= min {
			last = i
		}
	}
	var write int64
	if last >= 0 && cum[last] > read {
		write = cum[last] - read
	}
	for i := range n {
		if marks[i] && cum[i] >= min {
			c.entries[hashes[i]] = cum[i]
		}
	}
	return Usage{Input: sum - read - write, CacheWrite: write, CacheRead: read}
}
