package kernel_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/badger"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
)

// capabilities are the optional Store interfaces, by name.
var capabilities = map[string]reflect.Type{
	"SessionDeleter":     reflect.TypeFor[kernel.SessionDeleter](),
	"SessionExporter":    reflect.TypeFor[kernel.SessionExporter](),
	"SessionImporter":    reflect.TypeFor[kernel.SessionImporter](),
	"SessionCollector":   reflect.TypeFor[kernel.SessionCollector](),
	"StoreChecker":       reflect.TypeFor[kernel.StoreChecker](),
	"EventLog":           reflect.TypeFor[kernel.EventLog](),
	"Leaser":             reflect.TypeFor[kernel.Leaser](),
	"SpaceChecker":       reflect.TypeFor[kernel.SpaceChecker](),
	"SpaceReclaimer":     reflect.TypeFor[kernel.SpaceReclaimer](),
	"StepEventCommitter": reflect.TypeFor[kernel.StepEventCommitter](),
	"SessionHeadLoader":  reflect.TypeFor[kernel.SessionHeadLoader](),
}

// TestStoreCapabilities holds the list of optional Store interfaces in
// store.go's comment to what store.go declares (every interface of the
// package a store implements is declared there, and listed), and the
// comment's table of which store implements which to the stores.
func TestStoreCapabilities(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	declaredIn := map[string]string{} // interface name -> file
	var listComment string
	for _, f := range pkgs["kernel"].Files {
		file := fset.Position(f.Pos()).Filename
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, sp := range gd.Specs {
				ts, ok := sp.(*ast.TypeSpec)
				if !ok {
					continue
				}
				if _, ok := ts.Type.(*ast.InterfaceType); ok && ts.Name.IsExported() {
					declaredIn[ts.Name.Name] = file
				}
			}
		}
		for _, cg := range f.Comments {
			if strings.HasPrefix(cg.Text(), "Optional Store capabilities") {
				listComment = cg.Text()
			}
		}
	}
	if listComment == "" {
		t.Fatal(`no "Optional Store capabilities" comment in package kernel`)
	}
	listed, implementers := parseCapabilityComment(listComment)
	var names []string
	for n := range capabilities {
		names = append(names, n)
		if !strings.HasSuffix(declaredIn[n], "store.go") {
			t.Errorf("%s is declared in %q; every optional Store interface is declared in kernel/store.go", n, declaredIn[n])
		}
	}
	slices.Sort(names)
	slices.Sort(listed)
	if !slices.Equal(names, listed) {
		t.Errorf("store.go's comment lists %v; the optional interfaces are %v", listed, names)
	}
	// Every other exported interface a store implements is a capability
	// too, and must be listed.
	stores := map[string]kernel.Store{"memory": memory.New(), "badger": (*badger.Store)(nil), "postgres": (*postgres.Store)(nil)}
	for name, file := range declaredIn {
		if _, ok := capabilities[name]; ok || name == "Store" || !strings.HasSuffix(file, "store.go") {
			continue
		}
		t.Errorf("store.go declares interface %s, which is not in the list of optional capabilities", name)
	}
	for store, s := range stores {
		var has []string
		for n, typ := range capabilities {
			if reflect.TypeOf(s).Implements(typ) {
				has = append(has, n)
			}
		}
		slices.Sort(has)
		want := implementers[store]
		slices.Sort(want)
		if !slices.Equal(has, want) {
			t.Errorf("the %s store implements %v; store.go's comment says %v", store, has, want)
		}
	}
	if len(implementers) != len(stores) {
		t.Errorf("store.go's comment names the stores %v; want memory, badger, postgres", implementers)
	}
}

// parseCapabilityComment reads the two tables of the comment: the
// capabilities (an indented line starting with a name, then its methods)
// and the stores (an indented line "store  Cap, Cap").
func parseCapabilityComment(c string) (listed []string, implementers map[string][]string) {
	implementers = map[string][]string{}
	for _, line := range strings.Split(c, "\n") {
		if !strings.HasPrefix(line, "\t") {
			continue
		}
		name, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest = strings.TrimSpace(rest)
		switch name {
		case "memory", "badger", "postgres":
			for _, cap := range strings.Split(rest, ",") {
				implementers[name] = append(implementers[name], strings.TrimSpace(cap))
			}
		default:
			listed = append(listed, name)
		}
	}
	return listed, implementers
}
