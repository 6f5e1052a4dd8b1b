package tokenizer

import "testing"

// BenchmarkFirstUse is what the first count of a run pays: the o200k_base
// vocabulary decompressed and its map built.
func BenchmarkFirstUse(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		if _, err := decodeVocab(o200kData); err != nil {
			b.Fatal(err)
		}
	}
}

// TestVocabSizes: the embedded vocabularies hold every rank of their
// encoding (o200k_base: 199,998 tokens; cl100k_base: 100,256), and a
// damaged file is an error, not a short vocabulary.
func TestVocabSizes(t *testing.T) {
	for _, tc := range []struct {
		data []byte
		want int
	}{{o200kData, 199998}, {cl100kData, 100256}} {
		ranks, err := decodeVocab(tc.data)
		if err != nil || len(ranks) != tc.want {
			t.Errorf("%d tokens (%v), want %d", len(ranks), err, tc.want)
		}
	}
	if _, err := decodeVocab(o200kData[:len(o200kData)/2]); err == nil {
		t.Error("half a vocabulary file decoded")
	}
}

// TestVocabularyOnFirstCount: getting an encoding holds no vocabulary;
// its first Count unpacks it.
func TestVocabularyOnFirstCount(t *testing.T) {
	e := &Encoding{name: Cl100kBase, data: cl100kData, pattern: cl100kPattern}
	if e.ranks != nil {
		t.Fatal("a vocabulary before any count")
	}
	if n := e.Count("hello world"); n != 2 || len(e.ranks) != 100256 {
		t.Fatalf("Count = %d, vocabulary %d tokens", n, len(e.ranks))
	}
}
