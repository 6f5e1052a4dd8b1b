package policy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
)

// genCommands writes the policy a team generates from an inventory of
// commands: one rule and one test per command, each rule a regular
// expression on the command line that applies to every tool.
func genCommands(n int) string {
	var b, t strings.Builder
	b.WriteString("name: generated\nrevision: \"1\"\ndefaults: {tool_call: allow}\nrules:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - id: cmd%d\n    effect: deny\n    when: call.command matches \"^tool%d( |$)\"\n", i, i)
		fmt.Fprintf(&t, "  - name: cmd%d\n    input: {call: {tool: run_command, args: {argv: [tool%d, x]}}}\n    expect: {decision: deny, rules: [cmd%d]}\n", i, i, i)
	}
	b.WriteString("tests:\n")
	b.WriteString(t.String())
	return b.String()
}

// privateCache is a fresh cache directory, 0700.
func privateCache(t *testing.T) *TestCache {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "policy")
	return &TestCache{Dir: dir, Build: "test-build"}
}

// TestGeneratedPolicyCachedVerdict is the scenario with the
// generated policy of 10,000 rules and 10,000 tests: the first load runs
// every test, and the index keeps each test to the few rules its command
// can match (counted, not timed); the second load of the same bytes takes
// the verdict from the cache and evaluates nothing; editing one rule runs
// the tests again.
func TestGeneratedPolicyCachedVerdict(t *testing.T) {
	const n = 10000
	src := []byte(genCommands(n))
	c := privateCache(t)
	opts := Options{Cache: c, Tools: BuiltinSpecs()}
	ctx := context.Background()
	p, err := Load(ctx, "gen.yaml", src, opts)
	if err != nil {
		t.Fatal(err)
	}
	v := p.TestVerdict()
	if v.Cached || v.Tests != n || v.CacheNote != "" {
		t.Fatalf("first load: %+v", v)
	}
	// Command toolN x can match the rules of tool1, tool12, ... toolN: at
	// most 5 rules each, where evaluating every rule is n per test.
	if v.Evaluated < n || v.Evaluated > 5*n {
		t.Fatalf("the tests evaluated %d rules, want between %d and %d", v.Evaluated, n, 5*n)
	}
	entries, _ := filepath.Glob(filepath.Join(c.Dir, "*.json"))
	if len(entries) != 1 {
		t.Fatalf("cache holds %v, want one entry", entries)
	}
	progress := 0
	opts.Progress = func(TestProgress) { progress++ }
	p, err = Load(ctx, "gen.yaml", src, opts)
	if err != nil {
		t.Fatal(err)
	}
	if v := p.TestVerdict(); !v.Cached || v.Evaluated != 0 || progress != 0 {
		t.Fatalf("second load: %+v (progress reported %d times): want the cached verdict and no test run", v, progress)
	}
	// The cached policy decides like the tested one.
	st := &kernel.State{Run: 1, Turn: 1}
	call, err := kernel.NewCall("c1", BuiltinSpecs()[5], []byte(`{"argv":["tool777","x"]}`), st)
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Decide(ctx, st, call); d.Effect != kernel.EffectDeny || len(d.Rules) != 1 || d.Rules[0] != "cmd777" {
		t.Fatalf("decision = %+v", d)
	}
	edited := strings.Replace(string(src), `"^tool777( |$)"`, `"^tool777( |$|-)"`, 1)
	p, err = Load(ctx, "gen.yaml", []byte(edited), opts)
	if err != nil {
		t.Fatal(err)
	}
	if v := p.TestVerdict(); v.Cached || v.Evaluated < n || progress == 0 {
		t.Fatalf("after editing one rule: %+v (progress reported %d times): want the tests run", v, progress)
	}
}

// TestCacheKey: the verdict is remembered for exactly the file's bytes,
// the registered tools' specs and the build; changing any of them runs
// the tests.
func TestCacheKey(t *testing.T) {
	src := []byte(genCommands(3))
	c := privateCache(t)
	ctx := context.Background()
	load := func(src []byte, c *TestCache, tools []kernel.ToolSpec) TestVerdict {
		t.Helper()
		p, err := Load(ctx, "k.yaml", src, Options{Cache: c, Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		return p.TestVerdict()
	}
	specs := BuiltinSpecs()
	load(src, c, specs)
	if !load(src, c, specs).Cached {
		t.Fatal("the same file, tools and build: not cached")
	}
	other := BuiltinSpecs()
	other[5].Tags = append(other[5].Tags, "shell") // run_command
	for name, v := range map[string]TestVerdict{
		"another tool spec": load(src, c, other),
		"no tools":          load(src, c, nil),
		"another build":     load(src, &TestCache{Dir: c.Dir, Build: "other-build"}, specs),
		"another byte":      load(append([]byte("# a comment\n"), src...), c, specs),
	} {
		if v.Cached {
			t.Errorf("%s: the cache vouched for the file", name)
		}
	}
	// A file whose tests read the machine's time zone is never cached.
	zoned := strings.Replace(string(src), "tests:\n", "budgets:\n  - id: night\n    warn_when: now.Local().Hour() < 6\ntests:\n  - name: night\n    input: {now: \"2026-01-01T01:00:00Z\"}\n    expect: {warnings: [night]}\n", 1)
	t.Setenv("TZ", "UTC")
	load([]byte(zoned), c, specs)
	if v := load([]byte(zoned), c, specs); v.Cached || !strings.Contains(v.CacheNote, "time zone (Local)") {
		t.Fatalf("time-zone dependent file: %+v", v)
	}
}

// TestCacheRefusesForeignEntries is the attack: a policy whose tests fail
// must never load because of a cache entry. An entry that says it passed,
// with the right key, is trusted only in a directory only this user can
// reach and only when it is this user's 0600 file: a wider mode, another
// owner, a symlink, a directory open to others, or a damaged or foreign
// entry all run the tests (which fail). With the correct owner and mode
// the forged entry is trusted, so each refusal below is the check at
// work, not a missing entry.
func TestCacheRefusesForeignEntries(t *testing.T) {
	src, err := os.ReadFile("testdata/errors/failing-test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cases := []struct {
		name  string
		setup func(t *testing.T, c *TestCache, entry string)
	}{
		{"mode 0644", func(t *testing.T, _ *TestCache, entry string) { chmod(t, entry, 0o644) }},
		{"mode 0660", func(t *testing.T, _ *TestCache, entry string) { chmod(t, entry, 0o660) }},
		{"another owner", func(t *testing.T, _ *TestCache, entry string) { chown(t, entry) }},
		{"directory 0755", func(t *testing.T, c *TestCache, _ string) { chmod(t, c.Dir, 0o755) }},
		{"directory of another owner", func(t *testing.T, c *TestCache, _ string) { chown(t, c.Dir) }},
		{"symlink", func(t *testing.T, c *TestCache, entry string) {
			real := filepath.Join(t.TempDir(), "entry.json")
			if err := os.Rename(entry, real); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, entry); err != nil {
				t.Fatal(err)
			}
		}},
		{"damaged", func(t *testing.T, _ *TestCache, entry string) {
			if err := os.WriteFile(entry, []byte(`{"version":1,"passed":tr`), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"another file's entry", func(t *testing.T, _ *TestCache, entry string) {
			b, _ := os.ReadFile(entry)
			b = []byte(strings.Replace(string(b), `"key":"`, `"key":"0`, 1))
			if err := os.WriteFile(entry, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"trusted", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := privateCache(t)
			if err := privateDir(c.Dir); err != nil {
				t.Fatal(err)
			}
			p, err := Compile(ctx, "failing.yaml", src, Options{})
			if err != nil {
				t.Fatal(err)
			}
			key, ok := c.cacheKey(sha256Hex(src), nil)
			if !ok {
				t.Fatal("no key")
			}
			if note := c.store(key, p); note != "" { // forge: "passed"
				t.Fatal(note)
			}
			entry := filepath.Join(c.Dir, key+".json")
			if tc.setup != nil {
				tc.setup(t, c, entry)
			}
			_, err = Load(ctx, "failing.yaml", src, Options{Cache: c})
			if tc.setup == nil {
				if err != nil {
					t.Fatalf("a forged entry with the right owner and mode is trusted (the boundary is the user); got %v", err)
				}
				return
			}
			if !errors.Is(err, ErrTestsFailed) {
				t.Fatalf("Load = %v, want the tests run and failing", err)
			}
		})
	}
}

// TestCacheNotes: the verdict says why the cache was not used.
func TestCacheNotes(t *testing.T) {
	src := []byte(genCommands(2))
	c := privateCache(t)
	ctx := context.Background()
	if _, err := Load(ctx, "n.yaml", src, Options{Cache: c}); err != nil {
		t.Fatal(err)
	}
	entries, _ := filepath.Glob(filepath.Join(c.Dir, "*.json"))
	chmod(t, entries[0], 0o644)
	p, err := Load(ctx, "n.yaml", src, Options{Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	if v := p.TestVerdict(); v.Cached || !strings.Contains(v.CacheNote, "mode 0644, not 0600") {
		t.Fatalf("verdict = %+v", v)
	}
	// The passing run replaced the entry: the next load is cached again.
	p, err = Load(ctx, "n.yaml", src, Options{Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	if v := p.TestVerdict(); !v.Cached {
		t.Fatalf("after the rewrite: %+v", v)
	}
	chmod(t, c.Dir, 0o777)
	p, err = Load(ctx, "n.yaml", src, Options{Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	if v := p.TestVerdict(); v.Cached || !strings.Contains(v.CacheNote, "chmod 700") {
		t.Fatalf("open directory: %+v", v)
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// chown gives path to another user (the tests run as root in CI; the
// ownership check is what they prove).
func chown(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("changing a file's owner needs root (this test runs as uid %d)", os.Geteuid())
	}
	if err := os.Lchown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
}

// TestCachedLoadKeepsWhatTheTestsSay: a load the cache vouches for does
// not decode the tests, yet reports the same deprecated test inputs, and
// its tests still run on request.
func TestCachedLoadKeepsWhatTheTestsSay(t *testing.T) {
	src, err := os.ReadFile("testdata/deprecated/turn-names.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := privateCache(t)
	ctx := context.Background()
	first, err := Load(ctx, "turn-names.yaml", src, Options{Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	second, err := Load(ctx, "turn-names.yaml", src, Options{Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	if !second.TestVerdict().Cached || second.tests != nil {
		t.Fatalf("second load: verdict %+v, %d tests decoded", second.TestVerdict(), len(second.tests))
	}
	if !slices.Equal(first.Deprecated(), second.Deprecated()) || !slices.ContainsFunc(second.Deprecated(), func(p Problem) bool {
		return strings.Contains(p.Msg, "input.turn is deprecated")
	}) {
		t.Fatalf("deprecated uses: first %v, cached %v", first.Deprecated(), second.Deprecated())
	}
	rep, err := second.RunTests(ctx)
	if err != nil || !rep.Passed() || len(rep.Results) != second.TestVerdict().Tests {
		t.Fatalf("RunTests on the cached policy: %v %+v", err, rep)
	}
}
