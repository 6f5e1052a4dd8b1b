package kernel

import (
	"strconv"
	"unicode/utf8"
)

// decodeFlat decodes tool arguments that are one JSON object of scalar
// members, the common case, as encoding/json would decode them into an
// any: strings without escapes, numbers (float64), true, false and null.
// ok is false for anything else (nested values, escapes, invalid UTF-8,
// bad JSON), and the caller decodes with encoding/json, which decides and
// words the error. encoding/json's reflection-driven decoder costs about
// seven allocations for two arguments; this costs the map and its values
// (RATIONALE.md, "Performance, round three: the loop"). FuzzDecodeFlat
// holds it to encoding/json's result whenever ok is true.
func decodeFlat(b []byte) (m map[string]any, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	m = make(map[string]any, 4)
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return m, skipSpace(b, i+1) == len(b)
	}
	for {
		var key string
		if key, i, ok = flatString(b, i); !ok {
			return nil, false
		}
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return nil, false
		}
		var v any
		switch c := b[i]; {
		case c == '"':
			var s string
			if s, i, ok = flatString(b, i); !ok {
				return nil, false
			}
			v = s
		case c == 't' || c == 'f' || c == 'n':
			switch {
			case hasWord(b, i, "true"):
				v, i = true, i+4
			case hasWord(b, i, "false"):
				v, i = false, i+5
			case hasWord(b, i, "null"):
				v, i = nil, i+4
			default:
				return nil, false
			}
		case c == '-' || c >= '0' && c <= '9':
			j, ok := numberEnd(b, i)
			if !ok {
				return nil, false
			}
			f, err := strconv.ParseFloat(string(b[i:j]), 64)
			if err != nil {
				return nil, false
			}
			v, i = f, j
		default:
			return nil, false
		}
		m[key] = v
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return m, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// flatString reads the string at b[i] (its opening quote): no escapes, no
// control characters, valid UTF-8.
func flatString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s := b[i+1 : j]
			if !utf8.Valid(s) {
				return "", i, false
			}
			return string(s), j + 1, true
		case c == '\\' || c < 0x20:
			return "", i, false
		}
	}
	return "", i, false
}

func hasWord(b []byte, i int, w string) bool {
	return len(b)-i >= len(w) && string(b[i:i+len(w)]) == w
}

// numberEnd returns the end of the JSON number at b[i], ok false when it
// is not one by JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func numberEnd(b []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return i, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}
