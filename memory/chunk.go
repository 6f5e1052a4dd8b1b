package memory

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxChunkRunes is the longest chunk Split makes, in runes: about 300
// tokens of English, short enough that a snippet fits an injection and a
// hit points at the paragraph that matched, long enough that a message of
// a few paragraphs stays one or two chunks.
const MaxChunkRunes = 1200

// Split cuts text into chunks of at most max runes (MaxChunkRunes when max
// <= 0), preferring to cut after a blank line, then after a line, then
// after a sentence, then at a space, and only then inside a word; it never
// cuts inside a UTF-8 sequence. Every rune of text is in exactly one chunk,
// in order (strings.Join(Split(t, n), "") == t). Chunks that hold only white
// space are dropped, so the join holds for text with content. Split of a
// 5 MB text is linear in its length.
func Split(text string, max int) []string {
	if max <= 0 {
		max = MaxChunkRunes
	}
	var out []string
	for len(text) > 0 {
		cut := cutPoint(text, max)
		if strings.TrimSpace(text[:cut]) != "" {
			out = append(out, text[:cut])
		}
		text = text[cut:]
	}
	return out
}

// cutPoint returns the byte offset at which the first chunk of text ends.
func cutPoint(text string, max int) int {
	// end is the byte offset just past max runes (or len(text)).
	end, n := 0, 0
	for end < len(text) && n < max {
		_, size := utf8.DecodeRuneInString(text[end:])
		end += size
		n++
	}
	if end == len(text) {
		return end
	}
	window := text[:end]
	// Prefer a cut in the second half of the window, so chunks stay long.
	low := len(window) / 2
	for _, sep := range []string{"\n\n", "\n", ". ", "? ", "! ", "。"} {
		if i := strings.LastIndex(window, sep); i >= low {
			return i + len(sep)
		}
	}
	if i := strings.LastIndexFunc(window, unicode.IsSpace); i >= low {
		_, size := utf8.DecodeRuneInString(window[i:])
		return i + size
	}
	return end
}
