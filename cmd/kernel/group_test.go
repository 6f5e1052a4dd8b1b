package main

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestSubcommandsHaveTheirOwnFlags: each subcommand of every group
// (sessions, policy, keys, ...) parses with a FlagSet of its own, so its
// help lists its flags and the common ones it reads, and no flag of
// another subcommand; a flag of another subcommand is a usage error
// naming it.
func TestSubcommandsHaveTheirOwnFlags(t *testing.T) {
	groups := 0
	for _, c := range commands() {
		g := c.group
		if g == nil {
			continue
		}
		groups++
		// The bare subcommand (kernel tools) is the group's own: its
		// help is the group's, its name the group's.
		for _, s := range g.all() {
			mine, _, _ := s.flagSet(g.name, io.Discard)
			args := []string{g.name}
			if s.name != "" {
				args = append(args, s.name)
			}
			_, out, _, _ := status(t, append([]string{"help"}, args...)...)
			if !strings.HasPrefix(out, "Usage: kernel "+mine.Name()+" [flags]") {
				t.Errorf("help %s:\n%s", mine.Name(), out)
			}
			for _, o := range g.all() {
				other, _, _ := o.flagSet(g.name, io.Discard)
				other.VisitAll(func(f *flag.Flag) {
					listed := regexp.MustCompile(`\n  --` + regexp.QuoteMeta(f.Name) + `[ \t\n]`).MatchString(out)
					if has := mine.Lookup(f.Name) != nil; listed != has {
						t.Errorf("help %s lists --%s: %t, want %t", mine.Name(), f.Name, listed, has)
					}
					if mine.Lookup(f.Name) == nil {
						code, _, _, msg := status(t, append(slices.Clone(args), "--"+f.Name+"=x")...)
						if code != exitUsage || !strings.Contains(msg, "--"+f.Name+" is not a flag of "+mine.Name()+" (it belongs to ") || !strings.Contains(msg, other.Name()) && !strings.Contains(msg, o.name) {
							t.Errorf("%s --%s: exit %d %q, want a usage error naming its subcommand", mine.Name(), f.Name, code, msg)
						}
					}
				})
			}
		}
		// Every subcommand of the table heads a line of the group's usage,
		// in the table's order.
		usage := g.usage()
		at := 0
		for _, s := range g.subs {
			i := strings.Index(usage[at:], "\n  "+s.name+" ")
			if i < 0 {
				i = strings.Index(usage[at:], "\n  "+s.name+"\n")
			}
			if i < 0 {
				t.Errorf("%s's usage lacks %s (after byte %d):\n%s", g.name, s.name, at, usage)
				continue
			}
			at += i + 1
		}
	}
	if groups < 8 {
		t.Errorf("%d groups in commands(), want at least sessions, policy, keys, store, plugins, mcp, sandbox, config", groups)
	}
}

// TestOneSubcommandMechanism: a command that is not a group takes no
// subcommand: its usage line names none, so every command with
// subcommands is a group (one table, one way to parse, describe and
// complete them).
func TestOneSubcommandMechanism(t *testing.T) {
	for _, c := range commands() {
		if c.group != nil {
			continue
		}
		col := collect(t.Context(), c, []string{"--help"})
		if strings.Contains(col.String(), "SUBCOMMAND") || regexp.MustCompile(`(?m)^\s+kernel `+c.name+` [a-z]+\b`).MatchString(col.String()) {
			t.Errorf("%s is not a group but its usage names subcommands:\n%s", c.name, col.String())
		}
	}
	// Nor does a command pick a subcommand by hand: no function of the
	// command's shape (ctx, args []string, env *cliEnv) compares its
	// first argument with a word (`kernel tools import` once did), only
	// the group's run does. Flags ("-h", "--version") are not words.
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !commandShaped(fn.Type) {
				continue
			}
			args := fn.Type.Params.List[1].Names[0].Name
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				var x, y ast.Expr
				switch n := n.(type) {
				case *ast.BinaryExpr:
					if n.Op != token.EQL && n.Op != token.NEQ {
						return true
					}
					x, y = n.X, n.Y
				case *ast.SwitchStmt:
					x = n.Tag
				default:
					return true
				}
				if !firstOf(x, args) {
					return true
				}
				if lit, ok := y.(*ast.BasicLit); y == nil || ok && lit.Kind == token.STRING && !strings.HasPrefix(lit.Value, `"-`) {
					t.Errorf("%s: %s picks a subcommand from %s[0] by hand; make the command a group (group.go)", fset.Position(n.Pos()), fn.Name.Name, args)
				}
				return true
			})
		}
	}
}

// commandShaped reports whether ft is a command's run function:
// func(context.Context, []string, *cliEnv) error.
func commandShaped(ft *ast.FuncType) bool {
	p := ft.Params.List
	if len(p) != 3 || len(p[1].Names) != 1 {
		return false
	}
	arr, ok := p[1].Type.(*ast.ArrayType)
	if !ok || arr.Len != nil || types.ExprString(arr.Elt) != "string" {
		return false
	}
	return types.ExprString(p[2].Type) == "*cliEnv"
}

// firstOf reports whether e is name[0].
func firstOf(e ast.Expr, name string) bool {
	ix, ok := e.(*ast.IndexExpr)
	if !ok {
		return false
	}
	id, ok := ix.X.(*ast.Ident)
	lit, isLit := ix.Index.(*ast.BasicLit)
	return ok && id.Name == name && isLit && lit.Value == "0"
}

// TestSessionsNeedTheStoreCapability: a store without an optional
// capability (kernel/store.go) makes the subcommand that needs it fail
// with a sentence saying so, not a type error or a crash. The memory store
// can delete sessions and nothing else.
func TestSessionsNeedTheStoreCapability(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{"kernel.yaml": "store: {kind: memory}\n", "s.jsonl": "{}\n"})
	conf := filepath.Join(dir, "kernel.yaml")
	for args, want := range map[string]string{
		"export s1":                  "this store cannot export sessions",
		"import " + dir + "/s.jsonl": "this store cannot import sessions",
		"gc --older-than 30d":        "this store cannot collect old sessions",
		"fsck":                       "this store cannot check its sessions",
	} {
		_, _, err := cli(t, append(append([]string{"sessions"}, strings.Fields(args)...), "--config", conf)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("sessions %s on a memory store: %v, want %q", args, err, want)
		}
	}
	if _, _, err := cli(t, "sessions", "rm", "nope", "--config", conf); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("sessions rm on a memory store: %v (it can delete: want not found)", err)
	}
}
