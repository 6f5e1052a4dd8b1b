package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"github.com/agentkernel/agentkernel/kernel"
)

// Limits of search.
const (
	searchMaxFiles   = 50  // files shown
	searchMaxPerFile = 10  // matching lines shown per file
	searchMaxMatches = 200 // matching lines shown in all
	searchLineBytes  = 300 // bytes shown of one matching line
)

// Search is the search tool: it finds lines matching a literal string or a
// regular expression in the workspace's text files. It is safe for
// concurrent use.
type Search struct{ ws *workspace }

type searchArgs struct {
	Pattern    string `json:"pattern"`
	Regex      bool   `json:"regex"`
	IgnoreCase bool   `json:"ignore_case"`
	Path       string `json:"path"`
	Glob       string `json:"glob"`
}

// Spec describes search.
func (t *Search) Spec() kernel.ToolSpec {
	return kernel.ToolSpec{
		Name: NameSearch,
		Description: "Search the workspace's text files for lines containing a pattern. The pattern is a literal string " +
			"unless regex is true (Go RE2 syntax, matched line by line). Results are grouped per file, in path order, " +
			"with each file's number of matching lines and the matching lines with their line numbers. Binary files, " +
			"symbolic links and .git directories are skipped. Output is capped; a marker says what was left out.",
		Schema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "minLength": 1, "description": "Text to find: a literal string, or a regular expression when regex is true."},
    "regex": {"type": "boolean", "description": "Treat pattern as a Go (RE2) regular expression. Default false: literal match."},
    "ignore_case": {"type": "boolean", "description": "Match without regard to letter case. Default false."},
    "path": {"type": "string", "description": "Directory (or single file) to search, relative to the workspace root. Default \".\"."},
    "glob": {"type": "string", "minLength": 1, "pattern": "^[^/]+$", "description": "Only search files whose base name matches this pattern, e.g. \"*.go\" or \"*_test.go\" (* ? [...] as in Go's path.Match; no \"/\" and no \"**\": use path to pick a directory)."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`)),
		Tier:   kernel.TierReadOnly,
		Tags:   []string{"fs", "read", "search"},
		Source: Source,
	}
}

// fileHits is the result for one file.
type fileHits struct {
	path  string
	count int
	lines []string // formatted, at most searchMaxPerFile
}

type searchStats struct {
	searched, binary, large, unreadable int
	files, matches                      int // files with matches, matching lines
	shownFiles, shownMatches            int
	hiddenMatches                       int // matching lines in files not shown
}

// Call runs the search.
func (t *Search) Call(ctx context.Context, raw json.RawMessage) (kernel.Result, error) {
	var a searchArgs
	if err := decodeArgs(raw, &a); err != nil {
		return kernel.Result{}, err
	}
	if a.Pattern == "" {
		return kernel.Result{}, invalidArg("pattern", "is required")
	}
	if a.Glob != "" {
		if strings.Contains(a.Glob, "/") {
			return kernel.Result{}, invalidArg("glob", "%q contains \"/\"; glob matches base names only, use path for the directory", a.Glob)
		}
		if _, err := path.Match(a.Glob, ""); err != nil {
			return kernel.Result{}, invalidArg("glob", "%q is not a valid pattern: %v", a.Glob, err)
		}
	}
	match, err := compileMatcher(a)
	if err != nil {
		return kernel.Result{}, err
	}
	root, err := clean(a.Path)
	if err != nil {
		return kernel.Result{}, err
	}
	if _, err := t.ws.root.Stat(root); err != nil {
		return kernel.Result{}, fsError("search", root, err)
	}

	var st searchStats
	var body strings.Builder
	full := false
	fsys := t.ws.root.FS()
	walkErr := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if p == root {
				return fsError("search", p, err)
			}
			st.unreadable++
			return nil
		}
		if d.IsDir() {
			if d.Name() == ".git" && p != root {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // symbolic links, devices, pipes, sockets
		}
		if a.Glob != "" {
			if ok, _ := path.Match(a.Glob, d.Name()); !ok {
				return nil
			}
		}
		h, skip := t.scan(p, match, &st)
		if skip || h.count == 0 {
			return nil
		}
		st.files++
		st.matches += h.count
		if full || st.shownFiles >= searchMaxFiles || st.shownMatches >= searchMaxMatches {
			full = true
			st.hiddenMatches += h.count
			return nil
		}
		group := formatHits(h, searchMaxMatches-st.shownMatches)
		if body.Len()+len(group) > t.ws.maxOutput && st.shownFiles > 0 {
			full = true
			st.hiddenMatches += h.count
			return nil
		}
		body.WriteString(group)
		st.shownFiles++
		st.shownMatches += min(len(h.lines), searchMaxMatches-st.shownMatches)
		return nil
	})
	if walkErr != nil {
		if errors.Is(walkErr, context.Canceled) || errors.Is(walkErr, context.DeadlineExceeded) {
			return kernel.Result{}, fmt.Errorf("search %q: %w", root, walkErr)
		}
		return kernel.Result{}, walkErr
	}
	return kernel.Result{Content: searchReport(a, root, st, body.String())}, nil
}

// scan reads one file and collects its matching lines. skip reports a file
// that was not searched (binary, too large, unreadable); st counts why.
func (t *Search) scan(p string, match func([]byte) bool, st *searchStats) (h fileHits, skip bool) {
	f, fi, err := t.ws.openRegular("search", p)
	if err != nil {
		st.unreadable++
		return h, true
	}
	defer f.Close()
	if fi.Size() > int64(t.ws.maxFile) {
		st.large++
		return h, true
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(t.ws.maxFile)+1))
	if err != nil {
		st.unreadable++
		return h, true
	}
	if len(data) > t.ws.maxFile {
		st.large++
		return h, true
	}
	if looksBinary(data) {
		st.binary++
		return h, true
	}
	st.searched++
	if !match(data) {
		return h, false
	}
	h.path = p
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if !match(line) {
			continue
		}
		h.count++
		if len(h.lines) < searchMaxPerFile {
			line = bytes.TrimSuffix(line, []byte("\r"))
			h.lines = append(h.lines, fmt.Sprintf("%6d: %s", n, cutLine(validText(line), searchLineBytes)))
		}
	}
	return h, false
}

// compileMatcher builds the line predicate for the arguments.
func compileMatcher(a searchArgs) (func([]byte) bool, error) {
	if !a.Regex && !a.IgnoreCase {
		lit := []byte(a.Pattern)
		return func(b []byte) bool { return bytes.Contains(b, lit) }, nil
	}
	expr := a.Pattern
	if !a.Regex {
		expr = regexp.QuoteMeta(expr)
	}
	if a.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, invalidArg("pattern", "invalid regular expression: %v", err)
	}
	return re.Match, nil
}

// formatHits renders one file's group, showing at most budget lines.
func formatHits(h fileHits, budget int) string {
	var b strings.Builder
	noun := "matching lines"
	if h.count == 1 {
		noun = "matching line"
	}
	fmt.Fprintf(&b, "%s (%d %s)\n", h.path, h.count, noun)
	lines := h.lines[:min(len(h.lines), budget)]
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if rest := h.count - len(lines); rest > 0 {
		fmt.Fprintf(&b, "  [%d more in this file; read_file %s to see them]\n", rest, h.path)
	}
	b.WriteByte('\n')
	return b.String()
}

func searchReport(a searchArgs, root string, st searchStats, body string) string {
	var b strings.Builder
	kind := "text"
	if a.Regex {
		kind = "regex"
	}
	where := ""
	if root != "." {
		where = " under " + root
	}
	if a.Glob != "" {
		where += fmt.Sprintf(" in files matching %q", a.Glob)
	}
	if st.matches == 0 {
		fmt.Fprintf(&b, "search: no matches for %s %q%s (%d files searched)", kind, a.Pattern, where, st.searched)
	} else {
		fmt.Fprintf(&b, "search: %d matching lines in %d files for %s %q%s (%d files searched)\n\n", st.matches, st.files, kind, a.Pattern, where, st.searched)
		b.WriteString(body)
	}
	if st.files > st.shownFiles {
		fmt.Fprintf(&b, "[search: output truncated: %d more files with %d matching lines not shown. Narrow the search with path or glob.]\n",
			st.files-st.shownFiles, st.hiddenMatches)
	}
	var skipped []string
	if st.binary > 0 {
		skipped = append(skipped, fmt.Sprintf("%d binary", st.binary))
	}
	if st.large > 0 {
		skipped = append(skipped, fmt.Sprintf("%d larger than the file limit", st.large))
	}
	if st.unreadable > 0 {
		skipped = append(skipped, fmt.Sprintf("%d unreadable", st.unreadable))
	}
	if len(skipped) > 0 {
		if st.matches == 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "[search: skipped files: %s]\n", strings.Join(skipped, ", "))
	}
	return strings.TrimRight(b.String(), "\n")
}

var _ kernel.Tool = (*Search)(nil)
