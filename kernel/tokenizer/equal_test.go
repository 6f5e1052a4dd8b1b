package tokenizer_test

import (
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer/codec"

	"github.com/agentkernel/agentkernel/kernel/tokenizer"
)

// TestCountsEqualTiktokenGo holds the compressed vocabularies and this
// package's byte-pair encoding to github.com/tiktoken-go/tokenizer (whose
// tables are OpenAI's): the same count for every file of this repository
// (Go, Markdown, YAML, JSON: code and prose), for every vocabulary token
// on its own (every 13th), and for random text mixing scripts, digits, spaces, emoji
// and invalid UTF-8.
func TestCountsEqualTiktokenGo(t *testing.T) {
	var texts []string
	size := 0
	filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == "node_modules" || d.Name() == "bin" || strings.HasPrefix(d.Name(), ".")) && p != "../.." {
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(p) {
		case ".go", ".md", ".yaml", ".json":
			if b, err := os.ReadFile(p); err == nil && len(b) < 200<<10 && size < 1<<20 { // a megabyte is enough
				texts = append(texts, string(b))
				size += len(b)
			}
		}
		return nil
	})
	if len(texts) < 50 {
		t.Fatalf("only %d files found", len(texts))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("aZ09 \t\n\r'sllveré日本語中文Привет😀🇫🇷-_.,;:!?()[]{}<>\"/\\")
	for range 300 {
		var b strings.Builder
		for range rng.IntN(400) {
			if rng.IntN(50) == 0 {
				b.WriteByte(byte(0x80 + rng.IntN(0x40))) // invalid UTF-8
				continue
			}
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	texts = append(texts, strings.Repeat("a", 5000), strings.Repeat("ab1 ", 3000), strings.Repeat("\xff", 100))
	for name, ref := range map[string]*codec.Codec{tokenizer.O200kBase: codec.NewO200kBase(), tokenizer.Cl100kBase: codec.NewCl100kBase()} {
		enc, _ := tokenizer.Get(name)
		for i, text := range texts {
			want, _ := ref.Count(text)
			if got := enc.Count(text); got != want {
				t.Errorf("%s: text %d (%d bytes, %q…): %d tokens, tiktoken-go counts %d", name, i, len(text), clip(text), got, want)
			}
		}
		for id := uint(0); ; id += 13 { // a sample: every token takes long under -race
			tok, err := ref.Decode([]uint{id})
			if err != nil {
				break
			}
			if got := enc.Count(tok); got != 1 && utf8.ValidString(tok) {
				if want, _ := ref.Count(tok); got != want {
					t.Errorf("%s: token %d %q counts %d, tiktoken-go %d", name, id, tok, got, want)
				}
			}
		}
	}
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40]
	}
	return s
}
