package config

import (
	"errors"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxLocateLines bounds the documents SyntaxError re-parses to find the
// culprit line (it parses prefixes: quadratic in the lines, on an error).
const maxLocateLines = 2000

// SyntaxError turns a YAML syntax error of data, the text of file, into an
// *Error at the line that causes it, with that line and a caret.
//
// yaml.v3 names the line where the construct being parsed began (its
// "context" mark), which for most mistakes is the line before the
// culprit, or no line at all: a tab in the indentation, an unclosed [ or
// {, a line indented too far or too little are all reported at the line
// above. The culprit is the first line at which the text stops being
// valid YAML for the same reason: the shortest prefix of the document,
// in whole lines, that fails with the same message. The column is where
// that line shows the mistake (the tab, the bracket or quote left open,
// the ':' not allowed there, the start of a misindented line), and a
// hint says what usually causes it.
func SyntaxError(file string, data []byte, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return YAMLError(file, err)
	}
	full := syntaxMessage(err.Error())
	lines := strings.SplitAfter(string(data), "\n")
	line := 0
	if len(lines) <= maxLocateLines {
		var prefix strings.Builder
		for i, l := range lines {
			prefix.WriteString(l)
			var n yaml.Node
			if perr := yaml.Unmarshal([]byte(prefix.String()), &n); perr != nil && syntaxMessage(perr.Error()) == full {
				line = i + 1
				break
			}
		}
	}
	if line == 0 {
		return YAMLError(file, err) // where yaml.v3 says
	}
	text := strings.TrimRight(lines[line-1], "\r\n")
	col, hint := culprit(full, text)
	return &Error{File: file, Line: line, Column: col, Err: errors.New(full + hint), Source: text}
}

// syntaxMessage is yaml.v3's message without "yaml: " and "line N: ".
func syntaxMessage(s string) string {
	s = strings.TrimPrefix(s, "yaml: ")
	if rest, ok := strings.CutPrefix(s, "line "); ok {
		if i := strings.Index(rest, ": "); i > 0 {
			return rest[i+2:]
		}
	}
	return s
}

// culprit is the column (1-based) of the mistake in the culprit line and
// a hint for the message.
func culprit(msg, text string) (int, string) {
	first := len(text) - len(strings.TrimLeft(text, " \t")) + 1
	switch {
	case strings.Contains(msg, "tab character"):
		return strings.IndexByte(text, '\t') + 1, " (YAML indents with spaces, never tabs)"
	case strings.Contains(msg, "expected ',' or ']'"):
		return openAt(text, '[', ']', first), " (a [ list opened here is not closed with ])"
	case strings.Contains(msg, "expected ',' or '}'"):
		return openAt(text, '{', '}', first), " (a { mapping opened here is not closed with })"
	case strings.Contains(msg, "end of stream") && strings.ContainsAny(text, `"'`):
		return strings.IndexAny(text, `"'`) + 1, " (a quote opened here is never closed)"
	case strings.Contains(msg, "mapping values are not allowed"):
		if i := strings.LastIndex(text, ": "); i >= 0 || strings.HasSuffix(text, ":") {
			if i < 0 {
				i = len(text) - 1
			}
			return i + 1, " (a second \"key: value\" on one line, or a line indented deeper than the key above it; quote a value that contains \": \")"
		}
	case strings.Contains(msg, "could not find expected ':'"):
		return first, " (a key needs a colon and a space after it: \"key: value\")"
	case strings.Contains(msg, "did not find expected key"), strings.Contains(msg, "did not find expected node content"):
		return first, " (check this line's indentation against the lines above it)"
	}
	return first, ""
}

// openAt is the column of the last open bracket of text that is not
// closed on the line, or def.
func openAt(text string, open, close byte, def int) int {
	var stack []int
	quote := byte(0)
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#' && (i == 0 || text[i-1] == ' '):
			i = len(text)
		case c == open:
			stack = append(stack, i)
		case c == close && len(stack) > 0:
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) == 0 {
		return def
	}
	return stack[len(stack)-1] + 1
}
