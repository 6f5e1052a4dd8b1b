package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

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
func privateCache(t *testing.T) *VerdictCache {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "policy")
	return &VerdictCache{Dir: dir, Build: "test-build"}
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
	load := func(src []byte, c *VerdictCache, tools []kernel.ToolSpec) TestVerdict {
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
		"another build":     load(src, &VerdictCache{Dir: c.Dir, Build: "other-build"}, specs),
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
		setup func(t *testing.T, c *VerdictCache, entry string)
	}{
		{"mode 0644", func(t *testing.T, _ *VerdictCache, entry string) { chmod(t, entry, 0o644) }},
		{"mode 0660", func(t *testing.T, _ *VerdictCache, entry string) { chmod(t, entry, 0o660) }},
		{"another owner", func(t *testing.T, _ *VerdictCache, entry string) { chown(t, entry) }},
		{"directory 0755", func(t *testing.T, c *VerdictCache, _ string) { chmod(t, c.Dir, 0o755) }},
		{"directory of another owner", func(t *testing.T, c *VerdictCache, _ string) { chown(t, c.Dir) }},
		{"symlink", func(t *testing.T, c *VerdictCache, entry string) {
			real := filepath.Join(t.TempDir(), "entry.json")
			if err := os.Rename(entry, real); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, entry); err != nil {
				t.Fatal(err)
			}
		}},
		{"damaged", func(t *testing.T, _ *VerdictCache, entry string) {
			if err := os.WriteFile(entry, []byte(`{"version":1,"passed":tr`), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"another file's entry", func(t *testing.T, _ *VerdictCache, entry string) {
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
	if !second.TestVerdict().Cached || !FromSnapshot(second) || second.tests != nil {
		t.Fatalf("second load: verdict %+v (from the snapshot: %t), %d tests decoded", second.TestVerdict(), FromSnapshot(second), len(second.tests))
	}
	// kernel policy check prints the same warnings and verdict either way.
	path := filepath.Join(t.TempDir(), "turn-names.yaml")
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	checked, err := CheckFile(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		cached, err := CheckFile(ctx, path, Options{Cache: c})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cached.Deprecated(), checked.Deprecated()) || cached.TestVerdict().Tests != checked.TestVerdict().Tests {
			t.Fatalf("check from the cache: %v %+v; in full: %v %+v", cached.Deprecated(), cached.TestVerdict(), checked.Deprecated(), checked.TestVerdict())
		}
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

// snapshotPolicies are the file the tests load (it denies rm) and the one
// a forged snapshot comes from (it allows everything).
const (
	denyRM = `name: rm
revision: "1"
defaults: {tool_call: allow}
rules:
  - id: no-rm
    effect: deny
    tools: [run_command]
    when: call.argv[0] == "rm"
tests:
  - name: rm
    input: {call: {tool: run_command, args: {argv: [rm, x]}}}
    expect: {decision: deny, rules: [no-rm]}
`
	allowAll = `name: rm
revision: "1"
defaults: {tool_call: allow}
`
)

// TestSnapshotRefusedUnlessTrusted is the attack on the snapshot: one that
// would make the file behave differently (a forged snapshot that allows
// what the file denies) is used only when it is this user's 0600 file in
// the private directory, is the one its verdict names by SHA-256, and is
// of this file's key. Each refusal loads the file in full (the rm call is
// denied), says why, and writes the snapshot again. With everything right
// the forged snapshot is trusted, so each refusal below is a check at
// work: the boundary is the user, as for the verdict.
func TestSnapshotRefusedUnlessTrusted(t *testing.T) {
	ctx := context.Background()
	forge := func(t *testing.T, key string) []byte {
		t.Helper()
		p, err := Compile(ctx, "rm.yaml", []byte(allowAll), Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := p.encodeSnapshot(key, 1)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// vouch makes the verdict name snapshot b.
	vouch := func(t *testing.T, c *VerdictCache, key string, b []byte) {
		t.Helper()
		e, note := c.entry(key)
		if e == nil {
			t.Fatalf("no verdict: %s", note)
		}
		e.Snapshot = sha256Hex(b)
		j, _ := json.Marshal(e)
		if err := os.WriteFile(c.path(key, entrySuffix), j, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write := func(t *testing.T, path string, b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name  string
		note  string
		setup func(t *testing.T, c *VerdictCache, key, snap string)
	}{
		{"not the verdict's", "SHA-256", func(t *testing.T, c *VerdictCache, key, snap string) { write(t, snap, forge(t, key)) }},
		{"truncated", "SHA-256", func(t *testing.T, c *VerdictCache, key, snap string) {
			b, _ := os.ReadFile(snap)
			write(t, snap, b[:len(b)/2])
		}},
		{"another file's", "not this file's", func(t *testing.T, c *VerdictCache, key, snap string) {
			b := forge(t, strings.Repeat("0", 64))
			write(t, snap, b)
			vouch(t, c, key, b)
		}},
		{"undecodable", "decode", func(t *testing.T, c *VerdictCache, key, snap string) {
			b := []byte("not a snapshot")
			write(t, snap, b)
			vouch(t, c, key, b)
		}},
		{"mode 0644", "mode 0644", func(t *testing.T, c *VerdictCache, key, snap string) {
			b := forge(t, key)
			write(t, snap, b)
			vouch(t, c, key, b)
			chmod(t, snap, 0o644)
		}},
		{"another owner", "belongs to uid 65534", func(t *testing.T, c *VerdictCache, key, snap string) {
			b := forge(t, key)
			write(t, snap, b)
			vouch(t, c, key, b)
			chown(t, snap)
		}},
		{"symlink", "too many levels of symbolic links", func(t *testing.T, c *VerdictCache, key, snap string) {
			b := forge(t, key)
			real := filepath.Join(t.TempDir(), "forged.snap")
			write(t, real, b)
			vouch(t, c, key, b)
			if err := os.Remove(snap); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, snap); err != nil {
				t.Fatal(err)
			}
		}},
		{"trusted", "", func(t *testing.T, c *VerdictCache, key, snap string) {
			b := forge(t, key)
			write(t, snap, b)
			vouch(t, c, key, b)
		}},
	}
	st := &kernel.State{Run: 1, Turn: 1}
	call, err := kernel.NewCall("c1", BuiltinSpecs()[5], []byte(`{"argv":["rm","x"]}`), st)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := privateCache(t)
			opts := Options{Cache: c}
			if _, err := Load(ctx, "rm.yaml", []byte(denyRM), opts); err != nil {
				t.Fatal(err)
			}
			key, _ := c.cacheKey(sha256Hex([]byte(denyRM)), nil)
			snap := c.path(key, snapshotSuffix)
			if _, err := os.Stat(snap); err != nil {
				t.Fatalf("no snapshot written: %v", err)
			}
			tc.setup(t, c, key, snap)
			p, err := Load(ctx, "rm.yaml", []byte(denyRM), opts)
			if err != nil {
				t.Fatal(err)
			}
			d := p.Decide(ctx, st, call)
			if tc.note == "" {
				if !FromSnapshot(p) || d.Effect != kernel.EffectAllow {
					t.Fatalf("a forged snapshot with the right owner, mode, hash and key is trusted (the boundary is the user); got %+v", d)
				}
				return
			}
			if v := p.TestVerdict(); FromSnapshot(p) || !v.Cached || !strings.Contains(v.CacheNote, tc.note) {
				t.Fatalf("verdict %+v (from the snapshot: %t): want a full load whose note says %q", v, FromSnapshot(p), tc.note)
			}
			if d.Effect != kernel.EffectDeny {
				t.Fatalf("decision %+v: the forged snapshot was used", d)
			}
			// The full load wrote the snapshot again.
			p, err = Load(ctx, "rm.yaml", []byte(denyRM), opts)
			if err != nil || !FromSnapshot(p) || p.TestVerdict().CacheNote != "" || p.Decide(ctx, st, call).Effect != kernel.EffectDeny {
				t.Fatalf("after the rewrite: %v, from the snapshot %t, %+v", err, err == nil && FromSnapshot(p), p.TestVerdict())
			}
		})
	}
}

// TestSnapshotRoundTrip builds random policies mixing every shape the rule
// index treats differently (guards on strings, numbers, booleans and
// missing values, in-lists, prefixes, regular expressions, paths, dry-run
// rules, globs), writes each one's snapshot and reads it back: the rules,
// their scopes and guards, and every decision on the tables' calls are the
// compiled file's.
func TestSnapshotRoundTrip(t *testing.T) {
	ctx := context.Background()
	guards := 0
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 7))
		src := randPolicy(rng, 40)
		want := compileForTest(t, src)
		b, err := want.encodeSnapshot("k", len(want.tests))
		if err != nil {
			t.Fatal(err)
		}
		got, err := policyFromSnapshot("rand.yaml", []byte(src), want.sha, Options{}, "k", b)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range want.rules {
			g := got.rules[i]
			if g.id != r.id || g.effect != r.effect || g.dryrun != r.dryrun || !reflect.DeepEqual(g.globs, r.globs) ||
				!reflect.DeepEqual(g.scope, r.scope) || g.guarded != r.guarded || !reflect.DeepEqual(g.guard, r.guard) ||
				(g.when == nil) != (r.when == nil) {
				t.Fatalf("seed %d: rule %s from the snapshot %+v, compiled %+v", seed, r.id, g, r)
			}
			if r.guarded {
				guards++
			}
		}
		for _, labels := range []map[string]string{nil, {"team": "t1"}} {
			st := &kernel.State{Run: 1, Turn: 1, Labels: labels, ToolCounts: map[string]int{}}
			for _, tool := range randCallTools {
				for _, args := range randArgs {
					var a map[string]any
					if err := yaml.Unmarshal([]byte(args), &a); err != nil {
						t.Fatal(err)
					}
					raw, _ := json.Marshal(a)
					c, err := kernel.NewCall("c1", want.specs.get(tool), raw, st)
					if err != nil {
						t.Fatal(err)
					}
					dw, dg := want.Decide(ctx, st, c), got.Decide(ctx, st, c)
					dw.ID, dg.ID, dw.EvalTime, dg.EvalTime = "", "", 0, 0
					if !reflect.DeepEqual(dg, dw) {
						t.Fatalf("seed %d: %s %s: from the snapshot %+v, compiled %+v", seed, tool, args, dg, dw)
					}
				}
			}
		}
	}
	if guards < 300 {
		t.Fatalf("only %d guarded rules: the comparison proves little", guards)
	}
}
