package kernel_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
)

// TestEventTypesListsEveryEvent: kernel.EventTypes names every Go type of
// the sealed Event set (every isEvent in the source), each once. A new
// event type that is not in the list fails here, before the schema and
// docs tests that are generated from the list could miss it.
func TestEventTypesListsEveryEvent(t *testing.T) {
	listed := kernel.EventTypes()
	byGoName := map[string]string{}
	for _, e := range eventSamples() {
		byGoName[reflect.TypeOf(e).Name()] = e.Type()
	}
	var unknown []string
	for _, name := range eventTypeNames(t) {
		ty, ok := byGoName[name]
		if !ok {
			unknown = append(unknown, name) // TestEveryEventHasASchema asks for a sample
			continue
		}
		if !slices.Contains(listed, ty) {
			t.Errorf("event %s (%s) is not in kernel.EventTypes: add it to eventKinds in kernel/event.go, then run `make generate`", ty, name)
		}
	}
	if len(listed) != len(eventTypeNames(t)) || len(slices.Compact(slices.Sorted(slices.Values(listed)))) != len(listed) {
		t.Errorf("kernel.EventTypes has %d types for %d Go event types (those without a sample in eventSamples: %v): each Go event type is in eventKinds in kernel/event.go, once",
			len(listed), len(eventTypeNames(t)), unknown)
	}
}

// TestClosedSetsListEveryConstant: every constant of the types StopReason,
// Outcome and Effect declared in package kernel is in its list
// (StopReasons, Outcomes, Effects), so a constant added to a const block
// but not to the list fails here, naming the list to extend.
func TestClosedSetsListEveryConstant(t *testing.T) {
	lists := map[string][]string{
		"StopReason": testutil.Strings(kernel.StopReasons()),
		"Outcome":    testutil.Strings(kernel.Outcomes()),
		"Effect":     testutil.Strings(kernel.Effects()),
	}
	listName := map[string]string{"StopReason": "stopReasons in kernel/kernel.go", "Outcome": "outcomes in kernel/outcome.go", "Effect": "effects in kernel/policy.go"}
	found := map[string]int{}
	fset, decls := sourceDecls(t)
	for _, d := range decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			typ, ok := vs.Type.(*ast.Ident)
			if !ok || lists[typ.Name] == nil {
				continue
			}
			for i, n := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					continue
				}
				v, _ := strconv.Unquote(lit.Value)
				found[typ.Name]++
				if !slices.Contains(lists[typ.Name], v) {
					t.Errorf("%s: %s %s = %q is not in the list: add it to %s, then run `make generate` and document it (docs/architecture.md, \"Closed sets\")",
						fset.Position(n.Pos()), typ.Name, n.Name, v, listName[typ.Name])
				}
			}
		}
	}
	for typ, list := range lists {
		if found[typ] != len(list) {
			t.Errorf("%d %s constants in the source, %d in the list %v", found[typ], typ, len(list), list)
		}
	}
}

// sourceDecls parses the package's own (non-test) files and returns their
// top-level declarations.
func sourceDecls(t *testing.T) (*token.FileSet, []ast.Decl) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var decls []ast.Decl
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		decls = append(decls, f.Decls...)
	}
	return fset, decls
}
