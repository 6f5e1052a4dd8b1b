package policy

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// LoadFile reads and loads a policy file; see Load.
func LoadFile(ctx context.Context, path string, opts Options) (*Policy, error) {
	src, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Load(ctx, path, src, opts)
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
//
// When ctx is done it stops compiling or testing within a few expressions
// and returns an error that matches ctx's (context.Canceled or
// context.DeadlineExceeded) and names the file. The kernel's CLI cancels
// it on SIGINT and SIGTERM.
func Load(ctx context.Context, name string, src []byte, opts Options) (*Policy, error) {
	p, ps, rep, err := compileAndTest(ctx, name, src, opts)
	if err != nil || rep == nil { // rep nil: the cache vouched for the file
		return p, err
	}
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
// not give its result to a kernel. It stops with ctx's error when ctx is
// done.
func Compile(ctx context.Context, name string, src []byte, opts Options) (*Policy, error) {
	p, ps, err := compileContext(ctx, name, src, opts)
	if err != nil {
		return nil, err
	}
	if p != nil {
		p.loadTests(ps)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return p, nil
}

// CompileFile reads and compiles a policy file; see Compile.
func CompileFile(ctx context.Context, path string, opts Options) (*Policy, error) {
	src, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Compile(ctx, path, src, opts)
}

// compileContext parses, compiles and lints src. The error is only ever
// ctx's (wrapped by cancelled); problems with the file are in ps.
func compileContext(ctx context.Context, name string, src []byte, opts Options) (*Policy, *problems, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, cancelled(name, "loading", err)
	}
	ps := &problems{file: name, lines: splitLines(src), ctx: ctx}
	doc := parseFile(ps, src)
	if err := ctx.Err(); err != nil {
		return nil, nil, cancelled(name, "parsing", err)
	}
	if doc == nil {
		return nil, ps, nil
	}
	// Build even after syntax problems: the parts that did decode still
	// get checked, so one run reports everything. The compiler stops
	// compiling once ctx is done (see compiler.ctx).
	p := build(ps, doc, src, opts)
	p.comp.ctx = nil // the policy outlives the load (Explain compiles)
	p.rindex = newRuleIndex(p.rules)
	if err := ctx.Err(); err != nil {
		return nil, nil, cancelled(name, "compiling", err)
	}
	return p, ps, nil
}

// cancelled wraps ctx's error: "policy FILE: cancelled while testing:
// context canceled". It matches context.Canceled (or DeadlineExceeded).
func cancelled(name, stage string, err error) error {
	return fmt.Errorf("policy %s: cancelled while %s: %w", name, stage, err)
}

// CheckFile is `kernel policy check`: it compiles and lints the file,
// including the lint that needs the tests run (rules no test exercises),
// but does not report test failures (that is `kernel policy test`). The
// error is a *LoadError, or ctx's when ctx is done. It returns the
// compiled policy when the check passes (its Deprecated uses, its
// TestVerdict). With Options.Cache, a file the cache vouches for is not
// tested again, and a file that passes every test is remembered.
func CheckFile(ctx context.Context, path string, opts Options) (*Policy, error) {
	src, err := readFile(path)
	if err != nil {
		return nil, err
	}
	p, _, rep, err := compileAndTest(ctx, path, src, opts)
	if err != nil {
		return nil, err
	}
	if rep != nil && len(rep.Untested) > 0 {
		return nil, &LoadError{File: path, Problems: rep.Untested}
	}
	return p, nil
}

// compileAndTest is what Load and CheckFile share: parse, compile and lint
// src, then run its tests unless Options.Cache vouches for it (rep is then
// nil). err is a *LoadError listing every problem of the file but the
// tests' failures (those are in rep), or ctx's. The tests are decoded only
// when they run or the file has other problems to report with theirs.
func compileAndTest(ctx context.Context, name string, src []byte, opts Options) (p *Policy, ps *problems, rep *TestReport, err error) {
	snapNote := ""
	if opts.Cache != nil {
		if err := ctx.Err(); err != nil {
			return nil, nil, nil, cancelled(name, "loading", err)
		}
		if p, snapNote = fromSnapshot(name, src, opts); p != nil {
			return p, nil, nil, nil
		}
	}
	p, ps, err = compileContext(ctx, name, src, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(ps.list) > 0 {
		if p != nil {
			p.loadTests(ps)
		}
		return nil, nil, nil, ps.err()
	}
	rep, err = p.testUnlessCached(ctx, ps, snapNote)
	if err != nil {
		return nil, nil, nil, err
	}
	return p, ps, rep, nil
}

// fromSnapshot is the policy of src built from the snapshot the test cache
// keeps beside its verdict (see snapshot.go), when the cache vouches for
// src and holds a snapshot it can trust. note says why a snapshot that
// exists was not used.
func fromSnapshot(name string, src []byte, opts Options) (p *Policy, note string) {
	if len(src) > MaxFileSize {
		return nil, ""
	}
	sha := sha256Hex(src)
	key, ok := opts.Cache.cacheKey(sha, opts.Tools)
	if !ok {
		return nil, ""
	}
	return opts.Cache.loadSnapshot(key, name, src, sha, opts)
}

// testUnlessCached runs the file's tests unless Options.Cache vouches for
// it (the report is then nil), records how in p.verdict, and remembers a
// file that passed, with its snapshot. The tests are decoded (into ps's
// problems) only when they run. snapNote is why the cache's snapshot of
// the file was not used, if one was there.
func (p *Policy) testUnlessCached(ctx context.Context, ps *problems, snapNote string) (*TestReport, error) {
	p.verdict = TestVerdict{Tests: p.testsDoc.count(), CacheNote: snapNote}
	key, c := "", p.opts.Cache
	if c != nil {
		if z := p.zoneDependent(); z != "" {
			p.verdict.CacheNote = fmt.Sprintf("test cache not used: the file's tests depend on the machine's time zone (%s)", z)
		} else if k, ok := c.cacheKey(p.sha, p.opts.Tools); !ok {
			p.verdict.CacheNote = "test cache not used: the kernel's build cannot be identified"
		} else {
			key = k
			hit, note := c.lookup(key, p.testsDoc.count())
			if hit {
				// The snapshot was missing or not usable (else this
				// full load would not have run): write it again.
				p.verdict.Cached = true
				p.verdict.CacheNote = join(snapNote, note)
				if note := c.store(key, p); note != "" {
					p.verdict.CacheNote = note
				}
				return nil, nil
			}
			p.verdict.CacheNote = join(snapNote, note)
		}
	}
	if p.loadTests(ps); len(ps.list) > 0 {
		return nil, ps.err()
	}
	start := time.Now()
	rep, err := p.RunTests(ctx)
	if err != nil {
		return nil, cancelled(p.file, "testing", err)
	}
	p.verdict.Evaluated, p.verdict.Elapsed = rep.Evaluated, time.Since(start)
	if key != "" && rep.Passed() {
		if note := c.store(key, p); note != "" {
			p.verdict.CacheNote = note
		}
	}
	return rep, nil
}

// TestFiles is `kernel policy test FILE...`: for each file it compiles the
// policy and runs its tests, writing go-test-like output to w. It reports
// whether every file compiled and passed. When ctx is done it stops: the
// error is then ctx's (wrapped, naming the file), and the files after it
// are not tested.
func TestFiles(ctx context.Context, w io.Writer, paths []string, opts Options, verbose bool) (bool, error) {
	ok := true
	for _, path := range paths {
		p, err := CompileFile(ctx, path, opts)
		if err != nil && ctx.Err() != nil {
			return false, err
		}
		if err != nil {
			ok = false
			fmt.Fprintf(w, "%v\nFAIL\t%s\t[does not compile]\n", err, path)
			continue
		}
		rep, err := p.RunTests(ctx)
		if err != nil {
			return false, cancelled(path, "testing", err)
		}
		if err := rep.Format(w, verbose); err != nil || !rep.Passed() {
			ok = false
		}
	}
	return ok, nil
}
