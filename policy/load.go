package policy

import (
	"fmt"
	"io"
	"os"
)

// LoadFile reads and loads a policy file; see Load.
func LoadFile(path string, opts Options) (*Policy, error) {
	src, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Load(path, src, opts)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read policy %s: %w", path, err)
	}
	return src, nil
}

// Load parses, compiles and lints src, then runs its tests. It returns a
// Policy only when all of that succeeds; otherwise a *LoadError listing
// every problem with its file:line:col (matching ErrSyntax, ErrCompile,
// ErrLint or ErrTestsFailed). name is the file name used in messages.
func Load(name string, src []byte, opts Options) (*Policy, error) {
	p, ps := compile(name, src, opts)
	if err := ps.err(); err != nil {
		return nil, err
	}
	rep := p.RunTests()
	for _, t := range rep.Results {
		for _, f := range t.Failures {
			ps.add(StageTest, t.Line, t.Col, fmt.Sprintf("test %q", t.Name), "%s", f)
		}
	}
	ps.list = append(ps.list, rep.Untested...)
	if err := ps.err(); err != nil {
		return nil, err
	}
	return p, nil
}

// Compile parses, compiles and lints src without running its tests (and so
// without the test-coverage lint). Use it to run the tests yourself
// (RunTests) or to explain inputs against a policy under construction; do
// not give its result to a kernel.
func Compile(name string, src []byte, opts Options) (*Policy, error) {
	p, ps := compile(name, src, opts)
	if err := ps.err(); err != nil {
		return nil, err
	}
	return p, nil
}

// CompileFile reads and compiles a policy file; see Compile.
func CompileFile(path string, opts Options) (*Policy, error) {
	src, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Compile(path, src, opts)
}

func compile(name string, src []byte, opts Options) (*Policy, *problems) {
	ps := &problems{file: name, lines: splitLines(src)}
	doc := parseFile(ps, src)
	if doc == nil {
		return nil, ps
	}
	// Build even after syntax problems: the parts that did decode still
	// get checked, so one run reports everything.
	p := build(ps, doc, src, opts)
	return p, ps
}

// CheckFile is `kernel policy check`: it compiles and lints the file,
// including the lint that needs the tests run (rules no test exercises),
// but does not report test failures (that is `kernel policy test`). The
// error is a *LoadError.
func CheckFile(path string, opts Options) error {
	p, err := CompileFile(path, opts)
	if err != nil {
		return err
	}
	rep := p.RunTests()
	if len(rep.Untested) > 0 {
		return &LoadError{File: path, Problems: rep.Untested}
	}
	return nil
}

// TestFiles is `kernel policy test FILE...`: for each file it compiles the
// policy and runs its tests, writing go-test-like output to w. It reports
// whether every file compiled and passed.
func TestFiles(w io.Writer, paths []string, opts Options, verbose bool) bool {
	ok := true
	for _, path := range paths {
		p, err := CompileFile(path, opts)
		if err != nil {
			ok = false
			fmt.Fprintf(w, "%v\nFAIL\t%s\t[does not compile]\n", err, path)
			continue
		}
		rep := p.RunTests()
		if err := rep.Format(w, verbose); err != nil || !rep.Passed() {
			ok = false
		}
	}
	return ok
}
