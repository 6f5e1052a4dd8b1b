package policy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/checker"
	exprcompiler "github.com/expr-lang/expr/compiler"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/optimizer"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
	"gopkg.in/yaml.v3"
)

// program is one compiled expression of the file. A full load compiles
// every expression (prog is set); a load from the test cache's snapshot
// (snapshot.go) compiles each on first use (lazy is set), so a start
// compiles only what its decisions evaluate. Either way the program is
// the one compile gives for the same source, build and tools.
type program struct {
	prog  *vm.Program
	src   exprSrc
	where string
	lazy  *lazyCompile
	// fast evaluates the program without the VM when its shape allows
	// (buildFast; nil otherwise). A lazy program's is lazy.fast.
	fast fastExpr
}

// lazyCompile is what compiling a program on first use needs, and its
// outcome: once makes that race-free, and later uses free of locks.
type lazyCompile struct {
	once sync.Once
	c    *compiler
	want resultKind
	upto int
	prog *vm.Program
	fast fastExpr
	err  error
}

// compiled returns the program, compiling it first if it is lazy. The
// error is a compile error, which only a damaged snapshot could give (the
// full load that wrote it compiled the same source): evaluation reports
// it as the expression's error, so deny and ask rules fail closed.
func (pr *program) compiled() (*vm.Program, error) {
	l := pr.lazy
	if l == nil {
		return pr.prog, nil
	}
	l.once.Do(func() {
		prog, errs := l.c.compileSrc(pr.src.Src, l.want, l.upto)
		if len(errs) > 0 {
			l.err = fmt.Errorf("%s does not compile: %s", pr.where, errs[0].msg)
			return
		}
		l.prog = prog
		if l.want == wantBool {
			l.fast = buildFast(prog.Node())
		}
	})
	return l.prog, l.err
}

// fastPath returns the program's fast closure, nil when it has none.
func (pr *program) fastPath() fastExpr {
	if pr.lazy == nil {
		return pr.fast
	}
	if _, err := pr.compiled(); err != nil {
		return nil
	}
	return pr.lazy.fast
}

// node returns the program's checked and optimised tree (nil when it
// does not compile).
func (pr *program) node() ast.Node {
	prog, err := pr.compiled()
	if err != nil {
		return &ast.NilNode{}
	}
	return prog.Node()
}

// compiler compiles the file's expressions against Env, inlining v.<name>
// (the vars) and budget.<name> (the budget constants) before type checking,
// so both are closed sets of names checked at compile time too.
type compiler struct {
	ps     *problems
	consts map[string]constDef
	vars   []namedExpr
	varIdx map[string]int
	mu     sync.Mutex // serialises compileSrc
	// configs are the expr configurations by resultKind (see config).
	configs [wantAny + 1]*conf.Config
	// ctx, when done, makes compile a no-op returning nil: the load is
	// being cancelled, and its caller returns ctx's error, not the result.
	ctx context.Context
}

func newCompiler(ps *problems, doc *fileDoc) *compiler {
	c := &compiler{ps: ps, ctx: ps.ctx, consts: map[string]constDef{}, vars: doc.Vars, varIdx: map[string]int{}}
	for _, k := range doc.Budget {
		c.consts[k.Name] = k
	}
	for i, v := range doc.Vars {
		c.varIdx[v.Name.V] = i
	}
	return c
}

// resultKind is what an expression must produce.
type resultKind uint8

const (
	wantBool resultKind = iota
	wantString
	wantAny
)

var exprEnv = Env{}

// compile compiles one expression; vars with an index below upto are
// visible (len(vars) for everything but vars themselves). A problem is
// reported and nil returned when it does not compile.
func (c *compiler) compile(e exprSrc, where string, want resultKind, upto int) *program {
	if c.ctx != nil && c.ctx.Err() != nil {
		return nil
	}
	prog, errs := c.compileSrc(e.Src, want, upto)
	if len(errs) > 0 {
		for _, err := range errs {
			c.report(e, where, err)
		}
		return nil
	}
	pr := &program{prog: prog, src: e, where: where}
	if want == wantBool {
		pr.fast = buildFast(prog.Node())
	}
	return pr
}

// compileJob is one expression to compile into *dst.
type compileJob struct {
	dst   **program
	src   exprSrc
	where string
	want  resultKind
}

// parallelJobs is the number of expressions below which compileAll
// compiles them one after the other.
const parallelJobs = 512

// compileAll compiles the jobs, with vars below upto visible, on up to
// GOMAXPROCS goroutines: each has a compiler of its own (expr's
// configurations cache types as they check, so they cannot be shared),
// and the problems are reported in the jobs' order, as compiling them one
// by one would.
func (c *compiler) compileAll(jobs []compileJob, upto int) {
	workers := min(runtime.GOMAXPROCS(0), len(jobs)/parallelJobs+1)
	if workers <= 1 {
		for _, j := range jobs {
			*j.dst = c.compile(j.src, j.where, j.want, upto)
		}
		return
	}
	found := make([][]Problem, len(jobs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		w := c.fork()
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) {
					return
				}
				j := jobs[i]
				*j.dst = w.compile(j.src, j.where, j.want, upto)
				if len(w.ps.list) > 0 {
					found[i], w.ps.list = w.ps.list, nil
				}
			}
		})
	}
	wg.Wait()
	for _, ps := range found {
		c.ps.list = append(c.ps.list, ps...)
	}
}

// fork is a compiler for another goroutine: the same file, vars and
// constants, its own configurations and problem list.
func (c *compiler) fork() *compiler {
	return &compiler{ps: &problems{file: c.ps.file, lines: c.ps.lines, ctx: c.ps.ctx}, ctx: c.ctx,
		consts: c.consts, vars: c.vars, varIdx: c.varIdx}
}

// exprError is a compile error at a rune offset of the expression.
type exprError struct {
	offset int
	msg    string
}

func (c *compiler) compileSrc(src string, want resultKind, upto int) (prog *vm.Program, errs []exprError) {
	if strings.TrimSpace(src) == "" {
		return nil, []exprError{{0, "the expression is empty"}}
	}
	// Explain compiles after the load, possibly from several goroutines:
	// the configurations are shared.
	c.mu.Lock()
	defer c.mu.Unlock()
	in := &inliner{c: c, upto: upto}
	cfg := c.config(want)
	cfg.Visitors = []ast.Visitor{in}
	defer func() {
		// expr is third-party code fed with user input: a panic in it is a
		// compile error of this expression, not a crash of the kernel.
		if r := recover(); r != nil {
			prog, errs = nil, []exprError{{0, fmt.Sprintf("the expression could not be compiled (%v)", r)}}
		}
	}()
	prog, err := compileWith(src, cfg)
	if len(in.errs) > 0 {
		return nil, in.errs
	}
	if err != nil {
		var fe *file.Error
		if errors.As(err, &fe) {
			return nil, []exprError{{fe.From, friendly(fe.Message, want)}}
		}
		return nil, []exprError{{0, friendly(err.Error(), want)}}
	}
	return prog, nil
}

// config returns the compiler's expr configuration for a result kind,
// made once per file: building one (expr's builtins table, the type
// information of Env) costs more than compiling a typical expression (see
// RATIONALE.md, "Policy load is linear: indexes, not pairs").
func (c *compiler) config(want resultKind) *conf.Config {
	if c.configs[want] != nil {
		return c.configs[want]
	}
	opts := []expr.Option{expr.Env(exprEnv), expr.DisableBuiltin("now")}
	opts = append(opts, exprFuncs...)
	switch want {
	case wantBool:
		opts = append(opts, expr.AsBool())
	case wantString:
		opts = append(opts, expr.AsKind(reflect.String))
	}
	cfg := conf.CreateNew()
	for _, op := range opts {
		op(cfg)
	}
	for name := range cfg.Disabled {
		delete(cfg.Builtins, name)
	}
	c.configs[want] = cfg
	return cfg
}

// compileWith is expr.Compile with a prepared configuration (the same
// steps: parse and check, optimise, compile).
func compileWith(src string, cfg *conf.Config) (*vm.Program, error) {
	cfg.Check()
	tree, err := checker.ParseCheck(src, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Optimize {
		if err := optimizer.Optimize(&tree.Node, cfg); err != nil {
			var fe *file.Error
			if errors.As(err, &fe) {
				return nil, fe.Bind(tree.Source)
			}
			return nil, err
		}
	}
	return exprcompiler.Compile(tree, cfg)
}

func (c *compiler) report(e exprSrc, where string, err exprError) {
	at := exprPos(c.ps.lines, e, err.offset)
	msg := err.msg
	if e.Comment != "" && e.Style == 0 {
		msg += fmt.Sprintf(" (YAML read %q as a comment and cut the expression there: write the expression as a block scalar, when: >-, or quote it)", e.Comment)
	}
	c.ps.at(StageCompile, at, where, "%s", msg)
}

// inliner replaces v.<name> with the var's expression and budget.<name>
// with the constant's value.
type inliner struct {
	c    *compiler
	upto int
	errs []exprError
	// loc, when set, is given to every node of an inlined var, so that a
	// runtime error inside it points at the v.<name> that brought it in.
	loc *file.Location
}

func (in *inliner) Visit(node *ast.Node) {
	if in.loc != nil {
		(*node).SetLocation(*in.loc)
	}
	m, ok := (*node).(*ast.MemberNode)
	if !ok {
		return
	}
	id, ok := m.Node.(*ast.IdentifierNode)
	if !ok || (id.Value != "v" && id.Value != "budget") {
		return
	}
	prop, ok := m.Property.(*ast.StringNode)
	if !ok {
		in.fail(m.Location(), fmt.Sprintf("%s must be followed by a name, as in %s.<name>", id.Value, id.Value))
		return
	}
	if id.Value == "budget" {
		k, ok := in.c.consts[prop.Value]
		if !ok {
			in.fail(m.Location(), fmt.Sprintf("unknown budget constant budget.%s (%s)", prop.Value, in.c.constNames()))
			return
		}
		ast.Patch(node, &ast.ConstantNode{Value: k.Value})
		return
	}
	i, ok := in.c.varIdx[prop.Value]
	switch {
	case !ok:
		in.fail(m.Location(), fmt.Sprintf("unknown var v.%s (%s)", prop.Value, in.c.varNames(len(in.c.vars))))
		return
	case i >= in.upto:
		in.fail(m.Location(), fmt.Sprintf("v.%s is defined at or after this var; a var may only use the vars before it", prop.Value))
		return
	}
	tree, err := parser.Parse(in.c.vars[i].Expr.Src)
	if err != nil {
		in.fail(m.Location(), fmt.Sprintf("var %s does not parse", prop.Value))
		return
	}
	loc := m.Location()
	if in.loc != nil {
		loc = *in.loc
	}
	sub := &inliner{c: in.c, upto: i, loc: &loc}
	ast.Walk(&tree.Node, sub)
	if len(sub.errs) > 0 {
		in.errs = append(in.errs, exprError{loc.From, fmt.Sprintf("var %s does not compile", prop.Value)})
		return
	}
	*node = tree.Node
	(*node).SetLocation(loc)
}

func (in *inliner) fail(loc file.Location, msg string) {
	if in.loc != nil {
		loc = *in.loc
	}
	in.errs = append(in.errs, exprError{loc.From, msg})
}

func (c *compiler) constNames() string {
	if len(c.consts) == 0 {
		return "the file has no budget: section"
	}
	return "defined: " + strings.Join(sortedKeys(c.consts), ", ")
}

func (c *compiler) varNames(upto int) string {
	if upto == 0 || len(c.vars) == 0 {
		return "no vars are defined before this point"
	}
	names := make([]string, 0, upto)
	for _, v := range c.vars[:min(upto, len(c.vars))] {
		names = append(names, v.Name.V)
	}
	sort.Strings(names)
	return "defined: " + strings.Join(names, ", ")
}

// envNames maps the env's Go types to the names an author writes.
var envNames = map[string]reflect.Type{
	"the environment":   reflect.TypeFor[Env](),
	"session":           reflect.TypeFor[SessionEnv](),
	"run":               reflect.TypeFor[RunEnv](),
	"turn":              reflect.TypeFor[TurnEnv](),
	"tool":              reflect.TypeFor[ToolEnv](),
	"call":              reflect.TypeFor[CallEnv](),
	"agent":             reflect.TypeFor[AgentEnv](),
	"a run.calls entry": reflect.TypeFor[CallOutcome](),
}

var (
	noFieldRE     = regexp.MustCompile(`type policy\.(\w+) has no field (\S+)`)
	unknownNameRE = regexp.MustCompile(`^unknown name (\S+)`)
	typeNameRE    = regexp.MustCompile(`policy\.(\w+)`)
)

// friendly rewrites expr's messages in the author's terms: env names
// instead of Go type names, and the valid fields listed.
func friendly(msg string, want resultKind) string {
	if m := noFieldRE.FindStringSubmatch(msg); m != nil {
		for name, t := range envNames {
			if t.Name() == m[1] {
				return fmt.Sprintf("%s has no field %s (fields: %s)", name, m[2], strings.Join(exprFields(t), ", "))
			}
		}
	}
	if m := unknownNameRE.FindStringSubmatch(msg); m != nil {
		switch m[1] {
		case "v", "budget":
			return fmt.Sprintf("%s must be followed by a name, as in %s.<name>", m[1], m[1])
		}
		return fmt.Sprintf("unknown name %s (the environment has: %s, v.<var>, budget.<constant>)", m[1], strings.Join(exprFields(reflect.TypeFor[Env]()), ", "))
	}
	switch {
	case want == wantBool && strings.HasPrefix(msg, "expected bool"):
		msg = "the expression must be true or false: " + msg
	case want == wantString && strings.HasPrefix(msg, "expected string"):
		msg = "a message must be a string expression (quote plain text: '\"like this\"'): " + msg
	}
	return typeNameRE.ReplaceAllStringFunc(msg, func(s string) string {
		for name, t := range envNames {
			if "policy."+t.Name() == s {
				return name
			}
		}
		return s
	})
}

// exprFields lists the expr names of a struct's fields.
func exprFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("expr"); tag != "" {
			out = append(out, tag)
		}
	}
	return out
}

// exprPos maps a rune offset inside an expression to its line and column
// in the file, for every scalar style YAML allows: plain and quoted
// scalars (possibly folded over several lines) and literal (|) or folded
// (>) blocks. Escapes inside double quotes can make the column approximate.
func exprPos(lines []string, e exprSrc, off int) pos {
	if e.At.Line == 0 || e.At.Line > len(lines) {
		return e.At
	}
	type seg struct{ line, col, n int }
	var segs []seg
	switch e.Style {
	case yaml.LiteralStyle, yaml.FoldedStyle:
		indent := -1
		for l := e.At.Line + 1; l <= len(lines); l++ {
			s := lines[l-1]
			if strings.TrimSpace(s) == "" {
				segs = append(segs, seg{l, 1, 0})
				continue
			}
			ind := len(s) - len(strings.TrimLeft(s, " "))
			if indent < 0 {
				indent = ind
			}
			if ind < indent {
				break
			}
			segs = append(segs, seg{l, indent + 1, utf8.RuneCountInString(s[indent:])})
		}
		// Leading blank lines are not part of the value.
		for len(segs) > 0 && segs[0].n == 0 {
			segs = segs[1:]
		}
	case yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle:
		// Walk the quoted text, skipping escapes, as far as the first line
		// goes; quoted expressions over several lines are rare.
		first := []rune(lines[e.At.Line-1])
		i := e.At.Col // the rune after the opening quote (0-based)
		for n := 0; n < off && i < len(first); n++ {
			i += quotedWidth(first[i:], e.Style == yaml.DoubleQuotedStyle)
		}
		return pos{e.At.Line, i + 1}
	default:
		col := e.At.Col
		first := lines[e.At.Line-1]
		rest := 0
		if i := runeIndex(first, col-1); i >= 0 {
			rest = utf8.RuneCountInString(first[i:])
		}
		segs = append(segs, seg{e.At.Line, col, rest})
		for l := e.At.Line + 1; l <= len(lines); l++ {
			s := lines[l-1]
			t := strings.TrimLeft(s, " \t")
			segs = append(segs, seg{l, len(s) - len(t) + 1, utf8.RuneCountInString(t)})
		}
	}
	for _, s := range segs {
		if off <= s.n {
			return pos{s.line, s.col + off}
		}
		off -= s.n + 1
	}
	return e.At
}

// runeIndex is the byte index of the n-th rune of s, or -1.
func runeIndex(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	if n == 0 {
		return len(s)
	}
	return -1
}

// quotedWidth is how many runes of a quoted YAML scalar make its next
// character: an escape (\n, \xNN, \uNNNN, \UNNNNNNNN) in double quotes, a
// doubled quote in single quotes, or one rune.
func quotedWidth(r []rune, double bool) int {
	switch {
	case double && r[0] == '\\' && len(r) > 1:
		switch r[1] {
		case 'x':
			return min(4, len(r))
		case 'u':
			return min(6, len(r))
		case 'U':
			return min(10, len(r))
		}
		return 2
	case !double && r[0] == '\'' && len(r) > 1 && r[1] == '\'':
		return 2
	}
	return 1
}
