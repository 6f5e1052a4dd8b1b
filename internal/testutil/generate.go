package testutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The parts of schemas/ and docs/ that are generated from Go lists (the
// closed sets, the policy env) are kept in the files, where readers and
// editors find them, and rewritten in place: a value at a JSON pointer, or
// the lines between two markers of a Markdown file. Everything else in the
// file keeps its bytes. A test compares what the file holds with what the
// Go code says and fails naming `make generate`; `make generate` runs the
// same tests with -update, which rewrites the parts that differ
// (docs/architecture.md, "Closed sets"). Why in place: RATIONALE.md,
// "Generated in place, not in a separate file".

// GenerateCommand is what a generated part's error message tells the
// reader to run.
const GenerateCommand = "make generate"

// JSONEdit is one generated value of a JSON file: Value (any value
// encoding/json renders; an Object keeps its key order) belongs at Pointer
// (RFC 6901).
type JSONEdit struct {
	Pointer string
	Value   any
}

// Object is a JSON object whose keys keep their order.
type Object []Member

// Member is one key of an Object.
type Member struct {
	Key   string
	Value any
}

// MarshalJSON renders the members in order.
func (o Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.Key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// RewriteJSON returns data with each edit's value in place of the value at
// its pointer, and the pointers whose value differed (compared as JSON
// values, so formatting alone is no difference). A value that already
// matches keeps its bytes; a new one is rendered in the file's style (one
// line when it fits in 140 columns, else one member a line). A pointer
// that names nothing is an error.
func RewriteJSON(data []byte, edits []JSONEdit) ([]byte, []string, error) {
	var differ []string
	for _, e := range edits {
		start, end, err := jsonSpan(data, e.Pointer)
		if err != nil {
			return nil, nil, err
		}
		want, err := json.Marshal(e.Value)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", e.Pointer, err)
		}
		if jsonEqual(data[start:end], want) {
			continue
		}
		differ = append(differ, e.Pointer)
		lineStart := bytes.LastIndexByte(data[:start], '\n') + 1
		indent := leadingSpace(data[lineStart:start])
		var v any
		if err := unmarshalOrdered(want, &v); err != nil {
			return nil, nil, err
		}
		text := render(v, indent, start-lineStart)
		data = append(data[:start:start], append([]byte(text), data[end:]...)...)
	}
	return data, differ, nil
}

// JSONAt decodes the value at pointer of data into v.
func JSONAt(data []byte, pointer string, v any) error {
	start, end, err := jsonSpan(data, pointer)
	if err != nil {
		return err
	}
	return json.Unmarshal(data[start:end], v)
}

func leadingSpace(line []byte) string {
	n := 0
	for n < len(line) && line[n] == ' ' {
		n++
	}
	return string(line[:n])
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// jsonSpan finds the bytes of the value at pointer.
func jsonSpan(data []byte, pointer string) (start, end int, err error) {
	var want []string
	if pointer != "" {
		if !strings.HasPrefix(pointer, "/") {
			return 0, 0, fmt.Errorf("pointer %q does not start with /", pointer)
		}
		for _, p := range strings.Split(pointer[1:], "/") {
			want = append(want, strings.NewReplacer("~1", "/", "~0", "~").Replace(p))
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	found := false
	var walk func(path []string) error
	walk = func(path []string) error {
		s := skipSeparators(data, int(dec.InputOffset()))
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			i := 0
			for dec.More() {
				key := strconv.Itoa(i)
				if d == '{' {
					k, err := dec.Token()
					if err != nil {
						return err
					}
					key = k.(string)
				}
				if err := walk(append(path[:len(path):len(path)], key)); err != nil {
					return err
				}
				i++
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
		}
		if !found && slices.Equal(path, want) {
			start, end, found = s, int(dec.InputOffset()), true
		}
		return nil
	}
	if err := walk(nil); err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, err
	}
	if !found {
		return 0, 0, fmt.Errorf("no value at %s", pointer)
	}
	return start, end, nil
}

func skipSeparators(data []byte, i int) int {
	for i < len(data) && strings.IndexByte(" \t\r\n:,", data[i]) >= 0 {
		i++
	}
	return i
}

// unmarshalOrdered decodes JSON keeping the key order of objects (as
// Object).
func unmarshalOrdered(data []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var read func() (any, error)
	read = func() (any, error) {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch tok {
		case json.Delim('{'):
			var o Object
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				x, err := read()
				if err != nil {
					return nil, err
				}
				o = append(o, Member{k.(string), x})
			}
			_, err := dec.Token()
			return o, err
		case json.Delim('['):
			a := []any{}
			for dec.More() {
				x, err := read()
				if err != nil {
					return nil, err
				}
				a = append(a, x)
			}
			_, err := dec.Token()
			return a, err
		}
		return tok, nil
	}
	x, err := read()
	*v = x
	return err
}

// render writes v the way the schemas are written: `{"a": 1, "b": [2, 3]}`
// on one line when that fits in 140 columns from col, else one member or
// element a line, indented two spaces more than indent.
func render(v any, indent string, col int) string {
	if line := renderLine(v); col+len(line) <= 140 {
		return line
	}
	inner := indent + "  "
	var parts []string
	var open, close string
	switch v := v.(type) {
	case Object:
		open, close = "{", "}"
		for _, m := range v {
			k, _ := json.Marshal(m.Key)
			head := inner + string(k) + ": "
			parts = append(parts, head+render(m.Value, inner, len(head)))
		}
	case []any:
		open, close = "[", "]"
		for _, x := range v {
			parts = append(parts, inner+render(x, inner, len(inner)))
		}
	default:
		return renderLine(v)
	}
	if len(parts) == 0 {
		return open + close
	}
	return open + "\n" + strings.Join(parts, ",\n") + "\n" + indent + close
}

func renderLine(v any) string {
	switch v := v.(type) {
	case Object:
		parts := make([]string, len(v))
		for i, m := range v {
			k, _ := json.Marshal(m.Key)
			parts[i] = string(k) + ": " + renderLine(m.Value)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = renderLine(x)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case json.Number:
		return v.String()
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

// ReplaceBetween returns text with the lines between the line holding
// begin and the line holding end (both kept) replaced by body, which ends
// in a newline or is empty.
func ReplaceBetween(text, begin, end, body string) (string, error) {
	i := strings.Index(text, begin)
	if i < 0 {
		return "", fmt.Errorf("no %q marker", begin)
	}
	i += strings.IndexByte(text[i:], '\n') + 1
	j := strings.Index(text[i:], end)
	if j < 0 {
		return "", fmt.Errorf("no %q marker after %q", end, begin)
	}
	j = i + strings.LastIndexByte(text[i:i+j], '\n') + 1
	return text[:i] + body + text[j:], nil
}

// Generated holds the file at path to want, the file as the Go code makes
// it; what names the generated parts that differ, for the message. With
// update, a file that differs is written instead.
func Generated(t testing.TB, update bool, path string, want []byte, what []string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		return
	}
	if update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s: %s", path, strings.Join(what, ", "))
		return
	}
	t.Errorf("%s is out of date with the Go code it is generated from (%s): run `%s`", path, strings.Join(what, ", "), GenerateCommand)
}

// Section returns the text of the Markdown section whose heading line is
// heading ("## Stop reasons"): up to the next heading of the same or a
// higher level, or "" when there is none.
func Section(doc, heading string) string {
	lines := strings.SplitAfter(doc, "\n")
	level := len(heading) - len(strings.TrimLeft(heading, "#"))
	for i, l := range lines {
		if strings.TrimRight(l, "\n") != heading {
			continue
		}
		var b strings.Builder
		fence := false
		for _, m := range lines[i+1:] {
			if strings.HasPrefix(m, "```") {
				fence = !fence
			}
			if !fence && strings.HasPrefix(m, "#") {
				n := len(m) - len(strings.TrimLeft(m, "#"))
				if n <= level && strings.HasPrefix(m[n:], " ") {
					break
				}
			}
			b.WriteString(m)
		}
		return b.String()
	}
	return ""
}

// Tables returns the Markdown tables of text, each a list of rows (the
// header row first, the |---| row left out), each row its cells trimmed,
// with `\|` read as |.
func Tables(text string) [][][]string {
	var tables [][][]string
	var cur [][]string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "|") {
			if cur != nil {
				tables, cur = append(tables, cur), nil
			}
			continue
		}
		l = strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|")
		cells := strings.Split(strings.ReplaceAll(l, `\|`, "\x00"), "|")
		sep := true
		for i, c := range cells {
			c = strings.TrimSpace(strings.ReplaceAll(c, "\x00", "|"))
			cells[i] = c
			if strings.Trim(c, "-: ") != "" {
				sep = false
			}
		}
		if !sep {
			cur = append(cur, cells)
		}
	}
	if cur != nil {
		tables = append(tables, cur)
	}
	return tables
}

// Code returns the `code` spans of a Markdown cell, in order.
func Code(cell string) []string {
	var out []string
	for {
		i := strings.IndexByte(cell, '`')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(cell[i+1:], '`')
		if j < 0 {
			return out
		}
		out = append(out, cell[i+1:i+1+j])
		cell = cell[i+j+2:]
	}
}

// ReadFile returns the text of the file at path; a file that cannot be
// read ends the test.
func ReadFile(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// Strings converts a list of a string type (a closed set's members) to
// []string.
func Strings[T ~string](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}

// ListDiff says how got differs from want for a test message: the names
// missing from got, those it has extra, or that only the order differs.
// It returns "" when they are equal.
func ListDiff(got, want []string) string {
	if slices.Equal(got, want) {
		return ""
	}
	var missing, extra []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("missing %v", missing))
	}
	if len(extra) > 0 {
		parts = append(parts, fmt.Sprintf("extra %v", extra))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("the same names in another order: %v, want %v", got, want)
	}
	return strings.Join(parts, ", ")
}
