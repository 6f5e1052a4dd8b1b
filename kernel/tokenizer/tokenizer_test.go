package tokenizer_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/kernel/tokenizer"
)

// The reference counts are the token ids of tiktoken-go/tokenizer's own
// tests (tokenizer_test.go, TestO200kBase and TestCl100kBase), which come
// from OpenAI's tiktoken.
func TestReferenceCounts(t *testing.T) {
	cases := map[string][]struct {
		text string
		want int
	}{
		tokenizer.O200kBase: {
			{"'RE", 2},
			{"hello world", 2},
			{"hello  world", 3},
			{"hello   world", 3},
			{"supercalifragilistic", 6},
			{"We know what we are, but know not what we may be.", 14},
		},
		tokenizer.Cl100kBase: {
			{"'RE", 1},
			{"hello world", 2},
			{"hello  world", 3},
			{"hello   world", 3},
			{"supercalifragilistic", 7},
			{"We know what we are, but know not what we may be.", 14},
		},
	}
	for enc, cs := range cases {
		tok, err := tokenizer.Get(enc)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			t.Run(enc+"/"+c.text, func(t *testing.T) {
				if got := tok.Count(c.text); got != c.want {
					t.Fatalf("Count(%q) = %d, want %d", c.text, got, c.want)
				}
			})
		}
	}
}

func TestUnknownEncoding(t *testing.T) {
	_, err := tokenizer.Get("p50k")
	if err == nil || !strings.Contains(err.Error(), "o200k_base") {
		t.Fatalf("err = %v", err)
	}
}

func TestConcurrentFirstUse(t *testing.T) {
	tok, _ := tokenizer.Get(tokenizer.Cl100kBase)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if n := tok.Count("hello world"); n != 2 {
				t.Errorf("Count = %d", n)
			}
		})
	}
	wg.Wait()
}

func BenchmarkCount(b *testing.B) {
	tok, _ := tokenizer.Get(tokenizer.O200kBase)
	text := strings.Repeat("func (r *run) request(ctx context.Context, tools []ToolSpec) ([]Message, error) {\n", 100)
	tok.Count(text)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Count(text)
	}
}
