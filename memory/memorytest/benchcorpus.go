package memorytest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// BenchSizesEnv names the environment variable that picks the chunk
// counts of the retrieval benchmarks (comma-separated; default 10k, 100k
// and 1M).
const BenchSizesEnv = "AGENTKERNEL_MEMORY_BENCH_SIZES"

// BenchSizes are the chunk counts of the retrieval benchmarks, none above
// max: BenchSizesEnv's, or 10k, 100k and 1M.
func BenchSizes(tb testing.TB, max int) []int {
	env := os.Getenv(BenchSizesEnv)
	if env == "" {
		env = "10000,100000,1000000"
	}
	var out []int
	for _, f := range strings.Split(env, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n <= 0 {
			tb.Fatalf("%s: %q is not a chunk count", BenchSizesEnv, f)
		}
		if n <= max {
			out = append(out, n)
		}
	}
	return out
}

// BenchText draws the texts and prompts of the retrieval benchmarks:
// words of a synthetic vocabulary of 20,000, drawn with a Zipf law as the
// words of a conversation are. Both stores' benchmarks draw from it, so
// their numbers compare. Not safe for concurrent use.
type BenchText struct {
	words []string
	zipf  *rand.Zipf
}

// NewBenchText returns a BenchText whose draws follow seed.
func NewBenchText(seed uint64) *BenchText {
	r := rand.New(rand.NewPCG(1, 2)) // the vocabulary is the same for every seed
	const letters = "abcdefghijklmnopqrstuvwxyz"
	words := make([]string, 20000)
	for i := range words {
		b := make([]byte, 4+r.IntN(6))
		for j := range b {
			b[j] = letters[r.IntN(len(letters))]
		}
		words[i] = string(b)
	}
	return &BenchText{words: words, zipf: rand.NewZipf(rand.New(rand.NewPCG(seed, seed+1)), 1.1, 1, uint64(len(words)-1))}
}

// Words returns n words drawn, separated by spaces.
func (t *BenchText) Words(n int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(t.words[t.zipf.Uint64()])
	}
	return sb.String()
}
