package serve

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the parts of serve/openapi.json and docs/serve.md generated from the lists in serve/lists.go (make generate)")

// The closed sets of the API as strings, from their lists.
func scopeNames() []string {
	var out []string
	for _, s := range scopes {
		out = append(out, string(s.scope))
	}
	return out
}

func errorCodeNames() []string {
	var out []string
	for _, c := range errorCodes {
		out = append(out, string(c.code))
	}
	return out
}

// parseDir parses the Go files of dir (tests left out).
func parseDir(t *testing.T, dir string) (*token.FileSet, []*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

// constants returns the string constants of type typ declared in files,
// by name.
func constants(files []*ast.File, typ string) map[string]string {
	out := map[string]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				id, ok := vs.Type.(*ast.Ident)
				if !ok || id.Name != typ {
					if sel, ok := vs.Type.(*ast.SelectorExpr); !ok || sel.Sel.Name != typ {
						continue
					}
				}
				for i, n := range vs.Names {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
						out[n.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	return out
}

// TestListsNameEveryConstant: every Scope and errorCode constant of the
// package is in its list, and so is every kernel.Status (kernel/meta.go)
// and interrupted; the lists have no repeats. An error the server writes
// takes its code from a listed constant (errorf(codeX, ...)): a code
// written any other way would have no HTTP status and no row in
// docs/serve.md.
func TestListsNameEveryConstant(t *testing.T) {
	fset, files := parseDir(t, ".")
	_, kfiles := parseDir(t, "../kernel")
	statuses := constants(kfiles, "Status")
	for name, v := range constants(files, "Status") {
		statuses[name] = v
	}
	var statusNames []string
	for _, s := range sessionStatuses {
		statusNames = append(statusNames, string(s.status))
	}
	for _, c := range []struct {
		typ, list string
		consts    map[string]string
		members   []string
	}{
		{"Scope", "scopes in serve/lists.go", constants(files, "Scope"), scopeNames()},
		{"errorCode", "errorCodes in serve/lists.go", constants(files, "errorCode"), errorCodeNames()},
		{"Status", "sessionStatuses in serve/lists.go", statuses, statusNames},
	} {
		if len(c.consts) == 0 {
			t.Errorf("found no %s constants: the test no longer reads the source right", c.typ)
		}
		for name, v := range c.consts {
			if !slices.Contains(c.members, v) {
				t.Errorf("%s %s = %q is not in %s: add it there with what it means, then run `make generate`", c.typ, name, v, c.list)
			}
		}
		seen := map[string]bool{}
		for _, m := range c.members {
			if seen[m] {
				t.Errorf("%s lists %q twice", c.list, m)
			}
			seen[m] = true
		}
		if len(c.members) != len(c.consts) {
			t.Errorf("%s has %d members, the source %d %s constants", c.list, len(c.members), len(c.consts), c.typ)
		}
	}
	// Every error the server builds goes through errorf with a constant.
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				return n.Name.Name != "errorf" // the one place an apiError is built
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "errorf" && len(n.Args) > 0 {
					if arg, ok := n.Args[0].(*ast.Ident); !ok || !strings.HasPrefix(arg.Name, "code") {
						t.Errorf("%s: errorf's code must be one of the errorCode constants of serve/lists.go", fset.Position(n.Pos()))
					}
				}
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "errorCode" {
					t.Errorf("%s: a code made by conversion is in no list; add a constant to serve/lists.go", fset.Position(n.Pos()))
				}
			case *ast.CompositeLit:
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "apiError" {
					t.Errorf("%s: build API errors with errorf (its status comes from the list)", fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	// Each code's status is an error status; the ones the docs promise
	// Retry-After on are 429 or 503.
	for _, c := range errorCodes {
		if c.status < 400 || c.status > 599 || http.StatusText(c.status) == "" {
			t.Errorf("%s: status %d is not an HTTP error status", c.code, c.status)
		}
		if strings.Contains(c.means, "Retry-After") && c.status != http.StatusTooManyRequests && c.status != http.StatusServiceUnavailable {
			t.Errorf("%s: Retry-After with status %d", c.code, c.status)
		}
	}
}

// TestErrorStatusFromTheList: an error's HTTP status is its code's, as
// the list says, on the wire too.
func TestErrorStatusFromTheList(t *testing.T) {
	for _, c := range errorCodes {
		e := errorf(c.code, "x")
		if e.Status != c.status || e.Code != c.code {
			t.Errorf("errorf(%s) = %d %s, want %d", c.code, e.Status, e.Code, c.status)
		}
	}
	if got := errorCode("no_such_code").httpStatus(); got != http.StatusInternalServerError {
		t.Errorf("an unlisted code's status = %d, want 500", got)
	}
}

// TestLimitsDefaults: DefaultLimits sets every field of Limits (a new
// field without a default fails here), every field is a number
// (withDefaults fills the numbers), and a zero Limits means the defaults
// while a field that is set is kept.
func TestLimitsDefaults(t *testing.T) {
	d := DefaultLimits()
	v := reflect.ValueOf(d)
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanInt() || f.Int() <= 0 {
			t.Errorf("DefaultLimits().%s = %v: every limit needs a positive default", v.Type().Field(i).Name, f)
		}
	}
	if got := (Limits{}).withDefaults(); got != d {
		t.Errorf("Limits{}.withDefaults() = %+v, want %+v", got, d)
	}
	set := Limits{MaxRuns: 3, WriteTimeout: time.Second}
	got := set.withDefaults()
	want := d
	want.MaxRuns, want.WriteTimeout = 3, time.Second
	if got != want {
		t.Errorf("withDefaults() of %+v = %+v, want %+v", set, got, want)
	}
}

// openAPIEnums are the enums of serve/openapi.json generated from the
// lists.
func openAPIEnums() []testutil.JSONEdit {
	var statuses []string
	for _, s := range sessionStatuses {
		statuses = append(statuses, string(s.status))
	}
	return []testutil.JSONEdit{
		{Pointer: "/components/schemas/Scope/anyOf/0/enum", Value: scopeNames()},
		{Pointer: "/components/schemas/Error/properties/error/properties/code/enum", Value: errorCodeNames()},
		{Pointer: "/components/schemas/SessionStatus/enum", Value: statuses},
		{Pointer: "/paths/~1v1~1sessions/get/parameters/0/schema/enum", Value: statuses},
	}
}

// TestGeneratedOpenAPIEnums holds serve/openapi.json's enums of scopes,
// error codes and session statuses to the lists (`make generate`
// rewrites them).
func TestGeneratedOpenAPIEnums(t *testing.T) {
	data, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	want, differ, err := testutil.RewriteJSON(data, openAPIEnums())
	if err != nil {
		t.Fatal(err)
	}
	testutil.Generated(t, *update, "openapi.json", want, differ)
}

// limitRows are the rows of docs/serve.md's limits table: each field of
// Limits, its flag if it has one, and what a client gets past it. The
// values come from DefaultLimits.
func limitRows(d Limits) [][4]string {
	dur := func(x time.Duration) string { return "`" + x.String() + "`" }
	n := func(x int) string { return "`" + strconv.Itoa(x) + "`" }
	return [][4]string{
		{"runs in flight (`MaxRuns`)", n(d.MaxRuns), "`--max-runs`", "429 `too_many_runs` with `Retry-After`"},
		{"runs in flight of one key (`MaxRunsPerKey`)", n(d.MaxRunsPerKey), "`--max-runs-per-key`", "429 `too_many_runs` with `Retry-After`"},
		{"request body (`MaxBodyBytes`)", fmt.Sprintf("`%d` bytes", d.MaxBodyBytes), "`--max-body`", "413 `too_large`"},
		{"open event streams (`MaxStreams`)", n(d.MaxStreams), "`--max-streams`", "429 `too_many_streams` with `Retry-After`"},
		{"open event streams of one key (`MaxStreamsPerKey`)", n(d.MaxStreamsPerKey), "`--max-streams-per-key`", "429 `too_many_streams` with `Retry-After`"},
		{"of `MaxStreams`, those only keys with the `approve` scope may open (`StreamReserve`)", n(d.StreamReserve) + " (one sixteenth of `MaxStreams`)", "`--stream-reserve`", "429 `too_many_streams` with `Retry-After`, for a key without `approve`"},
		{"how long an event stream stays open (`StreamMaxAge`)", dur(d.StreamMaxAge), "`--stream-max-age`", "the stream ends with a notice to reconnect (an event stream resumes from `Last-Event-ID`)"},
		{"data sent and not acknowledged by the client (`PeerTimeout`)", dur(d.PeerTimeout), "`--peer-timeout`", "the connection is dropped (TCP_USER_TIMEOUT; streams send a heartbeat every 15 s)"},
		{"reading a request's headers (`ReadHeaderTimeout`)", dur(d.ReadHeaderTimeout), "", "the connection is closed"},
		{"reading a whole request (`ReadTimeout`)", dur(d.ReadTimeout), "", "the connection is closed"},
		{"an idle connection (`IdleTimeout`)", dur(d.IdleTimeout), "", "the connection is closed"},
		{"each write of a response, an event stream's included (`WriteTimeout`)", dur(d.WriteTimeout), "", "the stream is dropped; the client reconnects with `Last-Event-ID`"},
	}
}

// docsTables are the tables of docs/serve.md generated from the lists:
// begin marker, end marker, rows (the first is the header).
func docsTables() []struct {
	name, begin, end string
	rows             [][]string
} {
	scopeRows := [][]string{{"scope", "allows"}}
	codeRows := [][]string{{"code", "HTTP status", "means"}}
	statusRows := [][]string{{"status", "the session"}}
	limits := [][]string{{"limit", "default", "flag", "past it"}}
	for _, s := range scopes {
		scopeRows = append(scopeRows, []string{"`" + string(s.scope) + "`", s.allows})
	}
	for _, c := range errorCodes {
		codeRows = append(codeRows, []string{"`" + string(c.code) + "`", fmt.Sprintf("%d %s", c.status, http.StatusText(c.status)), c.means})
	}
	for _, s := range sessionStatuses {
		statusRows = append(statusRows, []string{"`" + string(s.status) + "`", s.means})
	}
	for _, r := range limitRows(DefaultLimits()) {
		limits = append(limits, r[:])
	}
	type table = struct {
		name, begin, end string
		rows             [][]string
	}
	return []table{
		{"the scopes table", "<!-- scopes table: generated", "<!-- end of scopes table -->", scopeRows},
		{"the error codes table", "<!-- error codes table: generated", "<!-- end of error codes table -->", codeRows},
		{"the session statuses table", "<!-- session statuses table: generated", "<!-- end of session statuses table -->", statusRows},
		{"the limits table", "<!-- limits table: generated", "<!-- end of limits table -->", limits},
	}
}

// TestGeneratedDocsTables holds docs/serve.md's tables of scopes, error
// codes, session statuses and limits to the lists and DefaultLimits
// (`make generate` rewrites them).
func TestGeneratedDocsTables(t *testing.T) {
	if n := len(limitRows(Limits{})); n != reflect.TypeFor[Limits]().NumField() {
		t.Errorf("limitRows has %d rows, Limits %d fields: describe the new limit there", n, reflect.TypeFor[Limits]().NumField())
	}
	const path = "../docs/serve.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	var what []string
	for _, tb := range docsTables() {
		var b strings.Builder
		for i, r := range tb.rows {
			b.WriteString("| " + strings.Join(r, " | ") + " |\n")
			if i == 0 {
				b.WriteString(strings.Repeat("|---", len(r)) + "|\n")
			}
		}
		next, err := testutil.ReplaceBetween(text, tb.begin, tb.end, b.String())
		if err != nil {
			t.Fatalf("%s: %s: %v", path, tb.name, err)
		}
		if next != text {
			what = append(what, tb.name)
		}
		text = next
	}
	testutil.Generated(t, *update, path, []byte(text), what)
}

// TestDocsStatusQuery: docs/serve.md's `?status=` values are the session
// statuses, in the list's order.
func TestDocsStatusQuery(t *testing.T) {
	data, err := os.ReadFile("../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`\\?status=([a-z_\\\\|]+)`").FindAllStringSubmatch(string(data), -1)
	if len(m) == 0 {
		t.Fatal("docs/serve.md has no `?status=...`")
	}
	want := strings.Join(sessionStatusNames(), `\|`)
	for _, s := range m {
		if s[1] != want {
			t.Errorf("docs/serve.md: ?status=%s, want ?status=%s (sessionStatuses in serve/lists.go)", s[1], want)
		}
	}
}
