package hooks

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// TruncateMiddle keeps the first head and the last tail bytes of s and
// replaces the middle with a marker line naming by and saying how many
// bytes and lines were cut. Cuts fall on UTF-8 boundaries (so slightly less
// may be kept). s is returned unchanged, with false, when it is not longer
// than head+tail.
func TruncateMiddle(s string, head, tail int, by string) (string, bool) {
	head, tail = max(head, 0), max(tail, 0)
	if len(s) <= head+tail {
		return s, false
	}
	h := head
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	t := len(s) - tail
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	cut := s[h:t]
	marker := fmt.Sprintf("\n[... %d bytes (%d lines) cut by %s: kept the first %d and the last %d bytes ...]\n",
		len(cut), strings.Count(cut, "\n"), by, h, len(s)-t)
	return s[:h] + marker + s[t:], true
}

// limits resolves an OutputLimitConfig to head and tail sizes.
func (c OutputLimitConfig) limits() (head, tail int, err error) {
	maxBytes := c.MaxBytes
	switch {
	case maxBytes < 0:
		return 0, 0, hookError(NameOutputLimit, "output_limit.max_bytes", fmt.Errorf("must not be negative, got %d", maxBytes))
	case maxBytes == 0:
		maxBytes = DefaultMaxBytes
	}
	if c.Head < 0 || c.Tail < 0 {
		return 0, 0, hookError(NameOutputLimit, "output_limit.head", fmt.Errorf("head and tail must not be negative, got %d and %d", c.Head, c.Tail))
	}
	head, tail = c.Head, c.Tail
	switch {
	case head == 0 && tail == 0:
		head = maxBytes * 3 / 4
		tail = maxBytes - head
	case tail == 0:
		tail = maxBytes - head
	case head == 0:
		head = maxBytes - tail
	}
	if head+tail > maxBytes || head < 0 || tail < 0 {
		return 0, 0, hookError(NameOutputLimit, "output_limit.head", fmt.Errorf("head (%d) + tail (%d) exceed max_bytes (%d)", c.Head, c.Tail, maxBytes))
	}
	return head, tail, nil
}
