package builtin

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/hooks"
	"github.com/agentkernel/agentkernel/kernel"
)

func TestSearch(t *testing.T) {
	e := newEnv(t, Config{MaxFileBytes: 4096})
	mkfiles(t, e.root, map[string]string{
		"main.go":          "package main\n\nfunc main() {\n\tRun()\n}\n",
		"run.go":           "package main\n\n// Run runs.\nfunc Run() {}\nfunc runAll() { Run(); Run() }\n",
		"run_test.go":      "package main\n\nfunc TestRun(t *testing.T) { Run() }\n",
		"docs/guide.md":    "# Guide\n\nCall Run (a.b) to start.\nwindows line\r\n",
		"docs/a.b.txt":     "literal a.b here\naxb is not a.b\n",
		"bin/tool":         "\x7fELF\x00Run\x00",
		".git/config":      "Run = yes\n",
		"vendor/.git/x.go": "Run\n",
		"huge.txt":         strings.Repeat("Run\n", 2000),
	})
	tests := []struct {
		name   string
		args   map[string]any
		golden string
		err    string
	}{
		{name: "literal", args: map[string]any{"pattern": "Run("}, golden: "literal.txt"},
		{name: "literal dot is not a wildcard", args: map[string]any{"pattern": "a.b", "path": "docs"}, golden: "literal_dot.txt"},
		{name: "regex", args: map[string]any{"pattern": `^func \w+\(`, "regex": true}, golden: "regex.txt"},
		{name: "ignore case", args: map[string]any{"pattern": "GUIDE", "ignore_case": true}, golden: "ignore_case.txt"},
		{name: "glob", args: map[string]any{"pattern": "Run", "glob": "*_test.go"}, golden: "glob.txt"},
		{name: "single file", args: map[string]any{"pattern": "Run", "path": "run.go"}, golden: "single_file.txt"},
		{name: "crlf", args: map[string]any{"pattern": "line$", "regex": true, "path": "docs"}, golden: "crlf.txt"},
		{name: "no match", args: map[string]any{"pattern": "nothing-like-this"}, golden: "no_match.txt"},
		{name: "missing path", args: map[string]any{"pattern": "x", "path": "nope"}, err: `search "nope": no such file or directory in the workspace`},
		{name: "bad regex", args: map[string]any{"pattern": "a(", "regex": true}, err: "/pattern: invalid regular expression: error parsing regexp: missing closing )"},
		{name: "glob with slash", args: map[string]any{"pattern": "x", "glob": "docs/*.md"}, err: `/glob: "docs/*.md" contains "/"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.call(t, "search", tc.args)
			if tc.err != "" {
				wantErr(t, err, tc.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "search/"+tc.golden, res.Content)
		})
	}
}

var groupRE = regexp.MustCompile(`(?m)^\S+ \((\d+) matching lines?\)$`)

func TestSearchCaps(t *testing.T) {
	e := newEnv(t, Config{})
	files := map[string]string{"a-many.txt": strings.Repeat("needle\n", 25)}
	total := 25
	for i := range 60 {
		files[fmt.Sprintf("f%02d.txt", i)] = strings.Repeat("needle\n", i%7+1)
		total += i%7 + 1
	}
	mkfiles(t, e.root, files)
	out := e.mustCall(t, "search", map[string]any{"pattern": "needle"})

	if want := fmt.Sprintf("search: %d matching lines in 61 files for text `needle` (61 files searched)\n", total); !strings.HasPrefix(out, want) {
		t.Fatalf("header:\n%s\nwant %q", out[:200], want)
	}
	groups := groupRE.FindAllStringSubmatch(out, -1)
	if len(groups) == 0 || len(groups) > searchMaxFiles {
		t.Fatalf("%d file groups shown, cap is %d", len(groups), searchMaxFiles)
	}
	inShown := 0
	for _, g := range groups {
		n, _ := strconv.Atoi(g[1])
		inShown += n
	}
	if shown := strings.Count(out, ": needle\n"); shown > searchMaxMatches {
		t.Fatalf("%d matching lines shown, cap is %d", shown, searchMaxMatches)
	}
	if !strings.Contains(out, "a-many.txt (25 matching lines)\n") || !strings.Contains(out, "  [15 more in this file; read_file a-many.txt to see them]\n") {
		t.Fatalf("per-file cap not reported:\n%s", out)
	}
	want := fmt.Sprintf("[search: output truncated: %d more files with %d matching lines not shown. Narrow the search with path or glob.]", 61-len(groups), total-inShown)
	if !strings.HasSuffix(out, want) {
		t.Fatalf("trailer:\n%s\nwant suffix %q", out[len(out)-200:], want)
	}
}

func TestSearchByteCap(t *testing.T) {
	e := newEnv(t, Config{MaxOutputBytes: 1000})
	files := map[string]string{}
	for i := range 30 {
		files[fmt.Sprintf("f%02d.txt", i)] = "needle " + strings.Repeat("z", 100) + "\n"
	}
	mkfiles(t, e.root, files)
	out := e.mustCall(t, "search", map[string]any{"pattern": "needle"})
	body, _, ok := strings.Cut(out, "[search: output truncated:")
	if !ok {
		t.Fatalf("no truncation marker:\n%s", out)
	}
	if len(body) > 1000+200 { // the cap applies to the groups; the header is extra
		t.Fatalf("body is %d bytes", len(body))
	}
}

func TestSearchCancelled(t *testing.T) {
	e := newEnv(t, Config{})
	mkfiles(t, e.root, map[string]string{"a.txt": "x\n"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.callCtx(ctx, t, "search", map[string]any{"pattern": "x"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// TestSearchFoldMatchesRegexp checks the fast case-insensitive matcher
// against (?i) regexp matching, including the non-ASCII folds of k and s.
func TestSearchFoldMatchesRegexp(t *testing.T) {
	lines := []string{"Hello World", "HELLO", "hello", "hELLo there", "help", "Kelvin \u212a", "long \u017f", "ASK", "ask", "A\u212aK", "caf\xe9 HELLO", ""}
	for _, pat := range []string{"hello", "HeLLo", "o w", "k", "sk", "ask", "1+1", "[x]"} {
		re := regexp.MustCompile("(?i)" + regexp.QuoteMeta(pat))
		m, err := compileMatcher(searchArgs{Pattern: pat, IgnoreCase: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			if got, want := m.line([]byte(l)), re.MatchString(l); got != want {
				t.Errorf("pattern %q, line %q: matched %v, regexp says %v", pat, l, got, want)
			}
		}
	}
}

// TestSearchSkipsHiddenFiles: a search without a glob does not read .env
// or other hidden files and directories, so a search for a token cannot
// reach secrets that a read_file of the file would have to ask for (this
// fails if the walk reads them). Asked for by name — as path, or with a
// glob starting with "." — they are searched, and the glob's resolution
// lists them, so a policy rule on touched paths sees them.
func TestSearchSkipsHiddenFiles(t *testing.T) {
	e := newEnv(t, Config{})
	mkfiles(t, e.root, map[string]string{
		".env":             "API_TOKEN=tok-secret-1\n",
		"config/.env.prod": "API_TOKEN=tok-secret-2\n",
		".aws/credentials": "API_TOKEN=tok-secret-3\n",
		"src/app.go":       "// API_TOKEN is read from the environment\n",
	})
	res, err := e.call(t, "search", map[string]any{"pattern": "API_TOKEN"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Content, "tok-secret") || !strings.Contains(res.Content, "src/app.go") {
		t.Fatalf("glob-less search:\n%s", res.Content)
	}
	res, err = e.call(t, "search", map[string]any{"pattern": "API_TOKEN", "path": ".env"})
	if err != nil || !strings.Contains(res.Content, "tok-secret-1") {
		t.Fatalf("search naming .env: %v\n%s", err, res.Content)
	}
	res, err = e.call(t, "search", map[string]any{"pattern": "API_TOKEN", "glob": ".env*"})
	if err != nil || !strings.Contains(res.Content, "tok-secret-2") {
		t.Fatalf("search with glob .env*: %v\n%s", err, res.Content)
	}
	pr, err := e.tools[NameSearch].(kernel.PathResolver).ResolvePaths([]byte(`{"pattern":"API_TOKEN","glob":".env*"}`))
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, p := range pr.Touched {
		rel = append(rel, filepath.Base(p))
	}
	if !slices.Contains(rel, ".env") || !slices.Contains(rel, ".env.prod") {
		t.Fatalf("the glob's touched paths %v do not list the .env files", pr.Touched)
	}
}

// smallSearchCaps makes the glob resolution's caps small for one test.
func smallSearchCaps(t *testing.T, glob, walk int) {
	oldGlob, oldWalk := searchGlobMax, searchWalkMax
	searchGlobMax, searchWalkMax = glob, walk
	t.Cleanup(func() { searchGlobMax, searchWalkMax = oldGlob, oldWalk })
}

// TestSearchGlobFailsClosed is issue 25's finding: resolution for policy
// stopped at a cap (256 files, 20,000 entries), and the search then read
// every file the glob selected, .env files policy never saw included.
// Now a glob whose files do not all fit the listing is refused, nothing
// read; one that fits searches exactly the files listed.
func TestSearchGlobFailsClosed(t *testing.T) {
	smallSearchCaps(t, 5, 40)
	e := newEnv(t, Config{})
	files := map[string]string{"services/api/.env": "API_TOKEN=tok-secret-9\n"}
	for i := range 6 {
		files[fmt.Sprintf("node_modules/p%d/.env.example", i)] = "API_TOKEN=\n"
	}
	mkfiles(t, e.root, files)
	args := `{"pattern":"API_TOKEN","glob":".env*"}`
	pr, err := e.tools[NameSearch].(kernel.PathResolver).ResolvePaths([]byte(args))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(pr.Touched, "services/api/.env") {
		t.Fatalf("the capped listing reached services/api/.env; the fixture proves nothing: %v", pr.Touched)
	}
	res, err := e.call(t, "search", args)
	if err == nil || !strings.Contains(err.Error(), "nothing was searched") || strings.Contains(res.Content, "tok-secret") {
		t.Fatalf("a glob beyond the listing ran: %v\n%s", err, res.Content)
	}
	// Too many entries to walk (the files themselves would fit): refused.
	smallSearchCaps(t, 100, 10)
	if _, err := e.call(t, "search", args); err == nil || !strings.Contains(err.Error(), "nothing was searched") {
		t.Fatalf("a glob over a tree beyond the walk ran: %v", err)
	}
	// Within the caps: exactly the listed files, .env included.
	smallSearchCaps(t, 100, 1000)
	pr, _ = e.tools[NameSearch].(kernel.PathResolver).ResolvePaths([]byte(args))
	res, err = e.call(t, "search", args)
	if err != nil || !slices.Contains(pr.Touched, "services/api/.env") || !strings.Contains(res.Content, "services/api/.env") {
		t.Fatalf("within the caps: %v %v\n%s", err, pr.Touched, res.Content)
	}
}

// TestSearchMatchesScrubbedText is issue 25's oracle: search counted
// matches in the raw file, so patterns growing one character at a time
// ("AKIA6", "AKIA6P", ...) recovered a key the scrubber hid from the
// output. Matching the scrubbed text (line for line, so line numbers
// hold) gives nothing to count.
func TestSearchMatchesScrubbedText(t *testing.T) {
	sc, err := hooks.NewScrubber(hooks.ScrubberConfig{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Config{Scrub: sc.ScrubLines})
	mkfiles(t, e.root, map[string]string{
		"creds.txt": "aws key: AKIA6PYCDYBK155OXTZ7\n" +
			"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\nVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA PRIVATE KEY-----\n" +
			"after the key\n",
	})
	for _, probe := range []string{"AKIA6P", "AKIA6PYCDYBK155OXTZ7", "MIIEow", "Nm0tRgeLez"} {
		res, err := e.call(t, "search", map[string]any{"pattern": probe})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(res.Content, "no matches") {
			t.Errorf("a search for %q inside a redacted credential matched:\n%s", probe, res.Content)
		}
	}
	res, err := e.call(t, "search", map[string]any{"pattern": "aws key"})
	if err != nil || !strings.Contains(res.Content, "1: aws key: [REDACTED]") || strings.Contains(res.Content, "AKIA") {
		t.Fatalf("search for the line's visible part: %v\n%s", err, res.Content)
	}
	res, err = e.call(t, "search", map[string]any{"pattern": "after the key"})
	if err != nil || !strings.Contains(res.Content, "6: after the key") {
		t.Fatalf("line numbers after a redacted key block: %v\n%s", err, res.Content)
	}
}
