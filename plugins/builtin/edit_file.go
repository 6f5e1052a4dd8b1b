package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/tool"
)

// EditFile is the edit_file tool: it replaces one exact, unique occurrence
// of a text in a file of the workspace. It is safe for concurrent use;
// edits are serialised with writes.
type EditFile struct{ ws *workspace }

type editFileArgs struct {
	Path string  `json:"path"`
	Old  string  `json:"old"`
	New  *string `json:"new"`
}

// Spec describes edit_file.
func (t *EditFile) Spec() kernel.ToolSpec {
	return kernel.ToolSpec{
		Name: NameEditFile,
		Description: "Replace exactly one occurrence of a text in a workspace file. old must match the file exactly " +
			"(whitespace, indentation and line breaks included, without read_file's line-number prefixes) and must " +
			"occur exactly once: if it is not found, or found several times, nothing is changed and the error says " +
			"where; add surrounding lines to old to make it unique. An empty new deletes the text.",
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File path relative to the workspace root."},
    "old": {"type": "string", "minLength": 1, "description": "The exact text to replace; it must occur exactly once in the file."},
    "new": {"type": "string", "description": "The replacement text; empty deletes old."}
  },
  "required": ["path", "old", "new"],
  "additionalProperties": false
}`),
		Tier:   kernel.TierSideEffecting,
		Tags:   []string{"fs", "write", "edit"},
		Source: Source,
	}
}

// editPlan is an edit as edit_file would make it: the file's path, its
// content now and after, and what changes. Call writes it; Preview
// shows it. Both get it from plan, so they cannot disagree.
type editPlan struct {
	p         string
	data, out []byte
	old, repl string // as matched: with CRLF line ends when the file has them
	at        int
	crlf      bool // old and new were given with LF and matched as CRLF
}

// plan checks an edit_file call and computes its edit, or returns the
// error the call fails with. The caller holds ws.writeMu.
func (t *EditFile) plan(ctx context.Context, raw json.RawMessage) (editPlan, error) {
	var a editFileArgs
	if err := decodeArgs(raw, &a); err != nil {
		return editPlan{}, err
	}
	switch {
	case a.Path == "":
		return editPlan{}, invalidArg("path", "is required")
	case a.Old == "":
		return editPlan{}, invalidArg("old", "is required and must not be empty; use write_file to create a file")
	case a.New == nil:
		return editPlan{}, invalidArg("new", "is required (use \"\" to delete old)")
	case *a.New == a.Old:
		return editPlan{}, invalidArg("new", "is identical to old; there is nothing to change")
	}
	p, err := clean(a.Path)
	if err != nil {
		return editPlan{}, err
	}
	if err := t.ws.refuseProtected("edit", p); err != nil {
		return editPlan{}, err
	}
	if err := ctx.Err(); err != nil {
		return editPlan{}, fmt.Errorf("edit %q: %w", p, err)
	}

	data, err := t.load(p)
	if err != nil {
		return editPlan{}, err
	}
	pl := editPlan{p: p, data: data, old: a.Old, repl: *a.New}
	at := indexAll(data, pl.old)
	if len(at) == 0 && bytes.Contains(data, []byte("\r\n")) && strings.Contains(pl.old, "\n") && !strings.Contains(pl.old, "\r\n") {
		// The file uses CRLF line endings and old was given with LF.
		pl.old, pl.repl, pl.crlf = toCRLF(pl.old), toCRLF(pl.repl), true
		at = indexAll(data, pl.old)
	}
	switch len(at) {
	case 0:
		return editPlan{}, fmt.Errorf("edit %q: old text not found; nothing was changed. Hint: %s", p, notFoundHint(data, a.Old))
	case 1:
	default:
		lines := make([]string, 0, len(at))
		for i, off := range at {
			if i == 20 {
				lines = append(lines, "…")
				break
			}
			lines = append(lines, fmt.Sprint(lineAt(data, off)))
		}
		return editPlan{}, fmt.Errorf("edit %q: old text occurs %d times (at lines %s); nothing was changed. Include more surrounding lines in old so that it matches exactly once",
			p, len(at), strings.Join(lines, ", "))
	}
	i := at[0]
	pl.at = i
	pl.out = make([]byte, 0, len(data)-len(pl.old)+len(pl.repl))
	pl.out = append(append(append(pl.out, data[:i]...), pl.repl...), data[i+len(pl.old):]...)
	return pl, nil
}

// what says what the edit replaces, in the past tense ("replaced 2 lines
// at line 3 with 1 line") or the present ("replace ...").
func (pl editPlan) what(past bool) string {
	line := lineAt(pl.data, pl.at)
	verb, del := "replace", "delete"
	if past {
		verb, del = "replaced", "deleted"
	}
	if pl.repl == "" {
		return fmt.Sprintf("%s %s at line %d", del, plural(lineCount(pl.old), "line"), line)
	}
	return fmt.Sprintf("%s %s at line %d with %s", verb, plural(lineCount(pl.old), "line"), line, plural(lineCount(pl.repl), "line"))
}

// Call performs the edit.
func (t *EditFile) Call(ctx context.Context, raw json.RawMessage) (kernel.Result, error) {
	t.ws.writeMu.Lock()
	defer t.ws.writeMu.Unlock()
	pl, err := t.plan(ctx, raw)
	if err != nil {
		return kernel.Result{}, err
	}
	if err := t.ws.writeRegular(ctx, "edit", pl.p, pl.out); err != nil {
		return kernel.Result{}, err
	}
	return kernel.Result{Content: fmt.Sprintf("edited %s: %s; the file is now %d bytes (was %d)", pl.p, pl.what(true), len(pl.out), len(pl.data))}, nil
}

// Preview shows the edit a call would make: the diff of the file, or the
// error the call would fail with. It only reads.
func (t *EditFile) Preview(ctx context.Context, raw json.RawMessage) (tool.Preview, error) {
	if err := ctx.Err(); err != nil {
		return tool.Preview{}, err
	}
	t.ws.writeMu.Lock()
	pl, err := t.plan(ctx, raw)
	t.ws.writeMu.Unlock()
	if err != nil {
		return refused(err), nil
	}
	fc := fileChange(pl.p, pl.data, pl.out, true)
	if pl.crlf {
		fc.Note = joinNote(fc.Note, "the file has CRLF line ends: old and new are matched and written with CRLF")
	}
	return tool.Preview{Summary: fmt.Sprintf("edit %s: %s", pl.p, pl.what(false)), Files: []tool.FileChange{fc}}, nil
}

// lineCount is the number of lines s spans: a final newline ends the last
// line rather than starting another.
func lineCount(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// load reads the file to edit, refusing binary and oversized files.
func (t *EditFile) load(p string) ([]byte, error) {
	f, fi, err := t.ws.openRegular("edit", p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The write refuses a kernel file under another name (a hard link);
	// so does the plan, before a preview could show what it holds.
	if err := t.ws.checkOpened("edit", p, fi); err != nil {
		return nil, err
	}
	if fi.Size() > int64(t.ws.maxFile) {
		return nil, fmt.Errorf("edit %q: the file is %s, over the edit limit of %s", p, humanSize(fi.Size()), humanSize(int64(t.ws.maxFile)))
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(t.ws.maxFile)+1))
	if err != nil {
		return nil, fsError("edit", p, err)
	}
	if len(data) > t.ws.maxFile {
		return nil, fmt.Errorf("edit %q: the file grew over the edit limit of %s", p, humanSize(int64(t.ws.maxFile)))
	}
	if looksBinary(data) {
		return nil, fmt.Errorf("edit %q: it looks like a binary file (contains NUL bytes); edit_file only edits text", p)
	}
	return data, nil
}

// indexAll returns the offset of every occurrence of s in data, overlapping
// ones included (so "aa" occurs twice in "aaa": replacing it is ambiguous).
func indexAll(data []byte, s string) []int {
	var at []int
	needle := []byte(s)
	for off := 0; ; {
		i := bytes.Index(data[off:], needle)
		if i < 0 {
			return at
		}
		at = append(at, off+i)
		off += i + 1
	}
}

// lineAt is the 1-based line number of byte offset off.
func lineAt(data []byte, off int) int { return 1 + bytes.Count(data[:off], []byte("\n")) }

func toCRLF(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}

var lineNumberPrefix = regexp.MustCompile(`(?m)^\s*\d+\t`)

// notFoundHint guesses why old did not match.
func notFoundHint(data []byte, old string) string {
	if lineNumberPrefix.MatchString(old) && !lineNumberPrefix.Match(data) {
		return "old seems to include read_file's line-number prefixes (number and tab); remove them."
	}
	if n := fuzzyLine(data, old); n > 0 {
		return fmt.Sprintf("a block that differs only in whitespace or indentation starts at line %d; read_file around it and copy the text exactly.", n)
	}
	return "old must match the file exactly, including whitespace, indentation and line breaks; read_file the region and copy the text (without line numbers)."
}

// fuzzyLine finds old in data comparing lines with surrounding whitespace
// trimmed, and returns the 1-based line where it starts, or 0.
func fuzzyLine(data []byte, old string) int {
	want := trimmedLines(old)
	if len(want) == 0 {
		return 0
	}
	have := trimmedLines(string(data))
	for i := 0; i+len(want) <= len(have); i++ {
		ok := true
		for j, w := range want {
			if j == 0 || j == len(want)-1 {
				// The first and last lines may be partial.
				if !strings.Contains(have[i+j].text, w.text) {
					ok = false
					break
				}
			} else if have[i+j].text != w.text {
				ok = false
				break
			}
		}
		if ok {
			return have[i].line
		}
	}
	return 0
}

type numberedLine struct {
	line int
	text string
}

// trimmedLines splits s into lines with surrounding whitespace removed,
// dropping blank lines but remembering each line's number.
func trimmedLines(s string) []numberedLine {
	var out []numberedLine
	for i, l := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(l); t != "" {
			out = append(out, numberedLine{line: i + 1, text: t})
		}
	}
	return out
}

var (
	_ kernel.Tool    = (*EditFile)(nil)
	_ tool.Previewer = (*EditFile)(nil)
)
