package hooks

import (
	"bytes"
	"encoding/base64"
	"strings"
	"unicode/utf8"
)

// placeholderShape reports text that stands for a credential by its shape:
// mostly one repeated filler character (X, x, 0, *), the word EXAMPLE,
// a template (<...>, ${...}, {{...}}), "your-..."/"..._here", a dunder
// name (__token__) or an ellipsis. Real credentials are random and never
// look like this, so the check applies to every detector's findings.
func placeholderShape(s string) bool {
	s = strings.Trim(s, `"'`+"`")
	if s == "" {
		return true
	}
	if strings.Contains(s, "EXAMPLE") {
		return true
	}
	switch {
	case strings.HasPrefix(s, "${") && strings.HasSuffix(s, "}"),
		strings.HasPrefix(s, "{{") && strings.HasSuffix(s, "}}"),
		strings.HasPrefix(s, "<") && strings.HasSuffix(s, ">"),
		strings.HasPrefix(s, "$(") && strings.HasSuffix(s, ")"),
		strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__"),
		strings.HasSuffix(s, "..."), strings.HasSuffix(s, "…"):
		return true
	}
	ls := strings.ToLower(s)
	if strings.HasPrefix(ls, "your") || strings.HasSuffix(ls, "here") || strings.Contains(ls, "changeme") || strings.Contains(ls, "replace_me") || strings.Contains(ls, "replace-me") {
		return true
	}
	// Mostly one filler character among the letters and digits.
	var fill [4]int // X, x, 0, *
	total := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case 'X':
			fill[0]++
		case 'x':
			fill[1]++
		case '0':
			fill[2]++
		case '*':
			fill[3]++
		}
		if isAlnum(s[i]) || s[i] == '*' {
			total++
		}
	}
	for _, k := range fill {
		if k >= 8 && k*10 >= total*6 {
			return true
		}
	}
	return false
}

// varRef reports a shell or environment variable reference: $NAME,
// ${NAME...}, $(command), %NAME%. A value that merely starts with '$'
// ("$ecretPass123!") is not one.
func varRef(v string) bool {
	switch {
	case strings.HasPrefix(v, "${"), strings.HasPrefix(v, "$("), strings.HasPrefix(v, "$$"):
		return true
	case strings.HasPrefix(v, "$"):
		name := v[1:]
		if name == "" {
			return true
		}
		for i := 0; i < len(name); i++ {
			c := name[i]
			if !(isAlnum(c) || c == '_') {
				return false
			}
		}
		return !isDigit(name[0]) && (strings.ToUpper(name) == name || strings.Contains(name, "_"))
	case len(v) > 2 && v[0] == '%' && v[len(v)-1] == '%':
		return true
	}
	return false
}

// benignBase64 reports a base64 token that decodes to something public:
// a file with a known signature (images, PDF, archives) or text. The
// entropy detector asks it before judging randomness. Decoded
// "user:password" text is not benign.
func benignBase64(tok string) bool {
	if len(tok) < 24 {
		return false
	}
	var dec []byte
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		n := len(tok) / 4 * 4
		if enc == base64.RawStdEncoding || enc == base64.RawURLEncoding {
			n = len(tok)
		}
		if b, err := enc.DecodeString(tok[:n]); err == nil && len(b) > 0 {
			dec = b
			break
		}
	}
	if dec == nil {
		return false
	}
	for _, sig := range [][]byte{
		[]byte("\x89PNG"), []byte("\xff\xd8\xff"), []byte("GIF8"), []byte("%PDF"), []byte("PK\x03\x04"),
		[]byte("\x1f\x8b"), []byte("RIFF"), []byte("BM"), []byte("\x00asm"), []byte("<?xml"), []byte("<svg"),
		[]byte("II*\x00"), []byte("MM\x00*"), []byte("OggS"), []byte("ID3"), []byte("\x7fELF"),
	} {
		if bytes.HasPrefix(dec, sig) {
			return true
		}
	}
	if !utf8.Valid(dec) {
		return false
	}
	printable, spaces := 0, 0
	for _, r := range string(dec) {
		if r == ' ' || r == '\n' || r == '\t' {
			spaces++
		}
		if r >= 0x20 && r != 0x7f || r == '\n' || r == '\t' || r == '\r' {
			printable++
		}
	}
	if printable*100 < utf8.RuneCount(dec)*95 {
		return false
	}
	// Text with words (spaces) or structure (JSON) is content; a short
	// "name:secret" without spaces is a credential.
	return spaces > 0 || bytes.HasPrefix(bytes.TrimSpace(dec), []byte("{")) || bytes.HasPrefix(bytes.TrimSpace(dec), []byte("["))
}
