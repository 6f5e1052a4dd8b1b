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
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentkernel/agentkernel/kernel"
)

// Limits of search.
const (
	searchMaxFiles   = 50  // files shown
	searchMaxPerFile = 10  // matching lines shown per file
	searchMaxMatches = 200 // matching lines shown in all
	searchLineBytes  = 300 // bytes shown of one matching line
)

// A glob's files are listed for policy (ResolvePaths) up to searchGlobMax
// files, visiting up to searchWalkMax entries to find them; a glob that
// selects more, or a tree larger than that, is refused rather than
// searched unseen. Variables so tests can make them small.
var (
	searchGlobMax = 1000
	searchWalkMax = 100000
)

// globFiles lists the regular files under dir (real, relative to the
// root) that a search with glob reads, in walk order: what policy sees as
// the call's touched paths and exactly what Call searches. complete is
// false when the walk stopped at searchWalkMax entries or searchGlobMax
// files; the list is then partial and Call refuses to run.
func (w *workspace) globFiles(dir, glob string) (files []string, complete bool) {
	seen := 0
	complete = true
	_ = fs.WalkDir(w.root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if seen++; seen > searchWalkMax {
			complete = false
			return fs.SkipAll
		}
		if err != nil {
			return nil
		}
		if d.IsDir() && p != dir && (d.Name() == ".git" || skipHidden(d.Name(), "")) {
			return fs.SkipDir
		}
		if d.Type().IsRegular() && (p == dir || !skipHidden(d.Name(), glob)) {
			if ok, _ := path.Match(glob, d.Name()); ok {
				if len(files) == searchGlobMax {
					complete = false
					return fs.SkipAll
				}
				files = append(files, p)
			}
		}
		return nil
	})
	return files, complete
}

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
			"symbolic links and .git directories are skipped, and so are hidden files and directories (names starting " +
			"with \".\", such as .env) unless path names one or glob starts with \".\". Output is capped; a marker says " +
			"what was left out.",
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
	var buf []byte
	full := false
	// visit scans one file and adds its group to the report.
	visit := func(p string) error {
		h, skip := t.scan(ctx, p, match, &st, &buf)
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
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
	}
	if a.Glob != "" {
		// Exactly the files policy saw (ResolvePaths): a glob that selects
		// more than were listed is refused, not searched unseen.
		files, complete := t.ws.globFiles(root, a.Glob)
		if !complete {
			return kernel.Result{}, fmt.Errorf("search %q with glob %q: it selects more than %d files (or the tree under it has more than %d entries), more than the kernel lists for policy to judge; nothing was searched. Narrow it with path (a directory) or a more specific glob",
				root, a.Glob, searchGlobMax, searchWalkMax)
		}
		for _, p := range files {
			if err := visit(p); err != nil {
				return kernel.Result{}, fmt.Errorf("search %q: %w", root, err)
			}
		}
		return kernel.Result{Content: searchReport(a, root, st, body.String())}, nil
	}
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
			if p != root && (d.Name() == ".git" || skipHidden(d.Name(), "")) {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // symbolic links, devices, pipes, sockets
		}
		if p != root && skipHidden(d.Name(), "") {
			return nil
		}
		return visit(p)
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
func (t *Search) scan(ctx context.Context, p string, match matcher, st *searchStats, buf *[]byte) (h fileHits, skip bool) {
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
	// Read into one buffer reused for every file of the call; one byte
	// more than the stat size detects a file that grew past the limit.
	need := int(fi.Size()) + 1
	if cap(*buf) < need {
		*buf = make([]byte, need)
	}
	data, err := readFull(ctx, f, (*buf)[:need], t.ws.maxFile+1)
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
	if match.file != nil && !match.file(data) {
		return h, false
	}
	h, ok := collectHits(ctx, p, data, match)
	if !ok {
		return h, true // the walk reports the deadline
	}
	if h.count > 0 && t.ws.scrub != nil {
		// Match what the model may see: a match inside a credential the
		// scrubber hides would tell, by its count, what the credential
		// holds. RATIONALE.md, "search matches scrubbed text".
		if clean := t.ws.scrub(string(data)); clean != string(data) {
			if h, ok = collectHits(ctx, p, []byte(clean), match); !ok {
				return h, true
			}
		}
	}
	return h, false
}

// collectHits finds the lines of data that match; ok is false when ctx
// ended on the way.
func collectHits(ctx context.Context, p string, data []byte, match matcher) (h fileHits, ok bool) {
	h.path = p
	for n := 1; len(data) > 0; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return h, false
		}
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if !match.line(line) {
			continue
		}
		h.count++
		if len(h.lines) < searchMaxPerFile {
			h.lines = append(h.lines, fmt.Sprintf("%6d: %s", n, cutLine(validText(line), searchLineBytes)))
		}
	}
	return h, true
}

// readChunk is the most one read or write does between two checks of the
// call's context.
const readChunk = 1 << 20

// matcher decides which lines match. file, when set, is a quick test a
// whole file must pass to contain any matching line.
type matcher struct {
	line func([]byte) bool
	file func([]byte) bool
}

// readFull reads f into buf, growing it while the file has more (it may
// have grown since its stat), up to limit bytes, checking ctx before every
// chunk of at most readChunk bytes.
func readFull(ctx context.Context, f io.Reader, buf []byte, limit int) ([]byte, error) {
	buf = buf[:min(len(buf), limit)]
	n := 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if n == len(buf) {
			if n >= limit {
				return buf[:n], nil
			}
			grow := min(2*len(buf)+1, limit) - len(buf)
			buf = slices.Grow(buf, grow)[:len(buf)+grow]
		}
		k, err := f.Read(buf[n:min(len(buf), n+readChunk)])
		n += k
		if errors.Is(err, io.EOF) {
			return buf[:n], nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// compileMatcher builds the matcher for the arguments. A regular
// expression is only ever run line by line, so ^ and $ mean the start and
// end of a line.
func compileMatcher(a searchArgs) (matcher, error) {
	if !a.Regex && !a.IgnoreCase {
		lit := []byte(a.Pattern)
		contains := func(b []byte) bool { return bytes.Contains(b, lit) }
		return matcher{line: contains, file: contains}, nil
	}
	if !a.Regex {
		if fold, ok := asciiFold(a.Pattern); ok {
			return matcher{line: fold, file: fold}, nil
		}
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
		return matcher{}, invalidArg("pattern", "invalid regular expression: %v", err)
	}
	m := matcher{line: re.Match}
	if !a.Regex {
		m.file = re.Match // a quoted literal cannot span lines or anchor
	}
	return m, nil
}

// asciiFold returns a case-insensitive literal matcher, much faster than
// (?i) regexp matching, when pat is ASCII without the letters k and s:
// every other ASCII letter folds only to its ASCII other case (k and s also
// fold to U+212A KELVIN SIGN and U+017F LATIN SMALL LETTER LONG S), so
// comparing ASCII-lowered text is then exactly what (?i) would match. The
// matcher keeps a scratch buffer: it is for one call, one goroutine.
func asciiFold(pat string) (func([]byte) bool, bool) {
	for i := 0; i < len(pat); i++ {
		if c := pat[i] | 0x20; pat[i] >= utf8.RuneSelf || c == 'k' || c == 's' {
			return nil, false
		}
	}
	lower := []byte(strings.ToLower(pat))
	var scratch []byte
	return func(b []byte) bool {
		scratch = append(scratch[:0], b...)
		for i, c := range scratch {
			if 'A' <= c && c <= 'Z' {
				scratch[i] = c + ('a' - 'A')
			}
		}
		return bytes.Contains(scratch, lower)
	}, true
}

// formatHits renders one file's group, showing at most budget lines.
func formatHits(h fileHits, budget int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)\n", h.path, plural(h.count, "matching line"))
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
		fmt.Fprintf(&b, "search: no matches for %s %s%s (%s searched)", kind, quotePattern(a.Pattern), where, plural(st.searched, "file"))
	} else {
		fmt.Fprintf(&b, "search: %s in %s for %s %s%s (%s searched)\n\n",
			plural(st.matches, "matching line"), plural(st.files, "file"), kind, quotePattern(a.Pattern), where, plural(st.searched, "file"))
		b.WriteString(body)
	}
	if st.files > st.shownFiles {
		fmt.Fprintf(&b, "[search: output truncated: %s with %s not shown. Narrow the search with path or glob.]\n",
			plural(st.files-st.shownFiles, "more file"), plural(st.hiddenMatches, "matching line"))
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

// quotePattern shows a pattern between backquotes, so a regular
// expression's backslashes read as written; %q when that is ambiguous.
func quotePattern(p string) string {
	if strings.ContainsAny(p, "`\n\r") || !utf8.ValidString(p) {
		return fmt.Sprintf("%q", p)
	}
	return "`" + p + "`"
}

var _ kernel.Tool = (*Search)(nil)

// skipHidden reports whether a walk skips the entry name: hidden files
// and directories (".env", ".aws") are searched only when the caller names
// them (as path, which the policy then sees, or with a glob starting with
// "." that selects them, which ResolvePaths lists), so that a search for a
// token cannot read secrets a read_file of them would have to ask for.
func skipHidden(name, glob string) bool {
	return strings.HasPrefix(name, ".") && !strings.HasPrefix(glob, ".")
}
