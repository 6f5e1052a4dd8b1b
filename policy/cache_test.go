package policy

import (
	"bytes"
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

	"github.com/agentkernel/agentkernel/internal/cachemac"
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
	entries, _ := filepath.Glob(filepath.Join(c.dir(), "*.json"))
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
// with the right key, is trusted only when its MAC verifies under the
// cache's key (which only this user can read), and only in a directory
// and a file that nobody else could have written: an entry written
// without the key (forged, edited, damaged, another user's or machine's),
// a file or directory others could write or another user owns, or a
// symlink all run the tests (which fail). One the key vouches for with a
// mode others could only read is narrowed and trusted (nobody else could
// have written it), and says so. With the key, owner and mode right the
// forged entry is trusted, so each refusal below is a check at work, not a
// missing entry.
func TestCacheRefusesForeignEntries(t *testing.T) {
	src, err := os.ReadFile("testdata/errors/failing-test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// rewrite replaces the entry's JSON, sealed with key (nil: not
	// sealed at all).
	rewrite := func(t *testing.T, c *TestCache, entry string, key *cachemac.Key, edit func(string) string) {
		t.Helper()
		b, err := os.ReadFile(entry)
		if err != nil {
			t.Fatal(err)
		}
		payload, err := cacheKeyOf(t, c).Unseal(b, filepath.Base(entry))
		if err != nil {
			t.Fatal(err)
		}
		out := []byte(edit(string(payload)))
		if key != nil {
			out = key.Seal(out, filepath.Base(entry))
		}
		if err := os.WriteFile(entry, out, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	same := func(s string) string { return s }
	otherKey := cachemac.NewKey(bytes.Repeat([]byte{9}, 32), "policy")
	cases := []struct {
		name    string
		setup   func(t *testing.T, c *TestCache, entry string)
		trusted bool   // the forged verdict is used
		note    string // what the verdict's note says
	}{
		{"forged without the key", func(t *testing.T, c *TestCache, entry string) { rewrite(t, c, entry, nil, same) }, false, "not authenticated"},
		{"forged with another key", func(t *testing.T, c *TestCache, entry string) { rewrite(t, c, entry, otherKey, same) }, false, "not authenticated"},
		{"edited", func(t *testing.T, c *TestCache, entry string) {
			b, _ := os.ReadFile(entry)
			os.WriteFile(entry, bytes.Replace(b, []byte(`"tests":`), []byte(`"tests": `), 1), 0o600)
		}, false, "not authenticated"},
		{"damaged", func(t *testing.T, _ *TestCache, entry string) {
			os.WriteFile(entry, []byte(`{"version":3,"passed":tr`), 0o600)
		}, false, "not authenticated"},
		{"another file's entry, sealed with the key", func(t *testing.T, c *TestCache, entry string) {
			rewrite(t, c, entry, cacheKeyOf(t, c), func(s string) string { return strings.Replace(s, `"key":"`, `"key":"0`, 1) })
		}, false, "not this file's"},
		{"mode 0660", func(t *testing.T, _ *TestCache, entry string) { chmod(t, entry, 0o660) }, false, "could have written"},
		{"another owner", func(t *testing.T, _ *TestCache, entry string) { chown(t, entry) }, false, "belongs to uid 65534"},
		{"directory 0770", func(t *testing.T, c *TestCache, _ string) { chmod(t, c.Dir, 0o770) }, false, "chmod 700"},
		{"directory of another owner", func(t *testing.T, c *TestCache, _ string) { chown(t, c.Dir) }, false, "belongs to uid 65534"},
		{"key file of another owner", func(t *testing.T, c *TestCache, _ string) { chown(t, filepath.Join(c.dir(), cachemac.KeyFile)) }, false, "made a new one"},
		{"symlink", func(t *testing.T, c *TestCache, entry string) {
			real := filepath.Join(t.TempDir(), "entry.json")
			if err := os.Rename(entry, real); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, entry); err != nil {
				t.Fatal(err)
			}
		}, false, "symbolic link"},
		{"mode 0644: narrowed, trusted", func(t *testing.T, _ *TestCache, entry string) { chmod(t, entry, 0o644) }, true, "narrowed to 0600"},
		{"directory 0755: narrowed, trusted", func(t *testing.T, c *TestCache, _ string) { chmod(t, c.Dir, 0o755) }, true, "narrowed to 0700"},
		{"trusted", nil, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := privateCache(t)
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
			os.Remove(c.path(key, snapshotSuffix)) // the verdict alone decides here
			entry := c.path(key, entrySuffix)
			if tc.setup != nil {
				tc.setup(t, c, entry)
			}
			p, err = Load(ctx, "failing.yaml", src, Options{Cache: c})
			if tc.trusted {
				if err != nil {
					t.Fatalf("a verdict sealed with the cache's key, this user's and not writable by others, is trusted (the boundary is the user's key); got %v", err)
				}
				if v := p.TestVerdict(); !v.Cached || !strings.Contains(v.CacheNote, tc.note) {
					t.Errorf("verdict %+v, want its note to say %q", v, tc.note)
				}
				return
			}
			if !errors.Is(err, ErrTestsFailed) {
				t.Fatalf("Load = %v, want the tests run and failing", err)
			}
			// A failed load has no verdict to read the note from; the
			// same change to a passing file's entry shows it.
			if got := noteFor(t, c, tc.setup); !strings.Contains(got, tc.note) {
				t.Errorf("note %q, want it to say %q", got, tc.note)
			}
		})
	}
}

// noteFor applies setup to the verdict of a file whose tests pass and
// returns the note of the next load, which runs the tests.
func noteFor(t *testing.T, c *TestCache, setup func(t *testing.T, c *TestCache, entry string)) string {
	t.Helper()
	ctx := context.Background()
	src := []byte(genCommands(2))
	c = &TestCache{Dir: filepath.Join(t.TempDir(), "policy2"), Build: c.Build}
	if _, err := Load(ctx, "n.yaml", src, Options{Cache: c}); err != nil {
		t.Fatal(err)
	}
	key, _ := c.cacheKey(sha256Hex(src), nil)
	os.Remove(c.path(key, snapshotSuffix))
	setup(t, c, c.path(key, entrySuffix))
	p, err := Load(ctx, "n.yaml", src, Options{Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	return p.TestVerdict().CacheNote
}

// cacheKeyOf is the MAC key of c: what only this user (and its kernel)
// holds.
func cacheKeyOf(t *testing.T, c *TestCache) *cachemac.Key {
	t.Helper()
	k, err := c.open(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestCacheNotes: the verdict says why the cache was not used.
func TestCacheNotes(t *testing.T) {
	src := []byte(genCommands(2))
	c := privateCache(t)
	ctx := context.Background()
	if _, err := Load(ctx, "n.yaml", src, Options{Cache: c}); err != nil {
		t.Fatal(err)
	}
	entries, _ := filepath.Glob(filepath.Join(c.dir(), "*.json"))
	chmod(t, entries[0], 0o660)
	p, err := Load(ctx, "n.yaml", src, Options{Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	if v := p.TestVerdict(); v.Cached || !strings.Contains(v.CacheNote, "mode 0660") {
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
	// vouch makes the verdict name snapshot b (sealed with the cache's
	// key, as only this user can).
	vouch := func(t *testing.T, c *TestCache, key string, b []byte) {
		t.Helper()
		e, _, note := c.entry(key)
		if e == nil {
			t.Fatalf("no verdict: %s", note)
		}
		e.Snapshot = sha256Hex(b)
		j, _ := json.Marshal(e)
		if err := os.WriteFile(c.path(key, entrySuffix), cacheKeyOf(t, c).Seal(j, key+entrySuffix), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// write writes a snapshot sealed with the cache's key; raw writes
	// bytes as they are.
	write := func(t *testing.T, c *TestCache, path string, b []byte) {
		t.Helper()
		if err := os.WriteFile(path, cacheKeyOf(t, c).Seal(b, filepath.Base(path)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	raw := func(t *testing.T, path string, b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name    string
		note    string
		trusted bool
		setup   func(t *testing.T, c *TestCache, key, snap string)
	}{
		{"forged without the key", "not authenticated", false, func(t *testing.T, c *TestCache, key, snap string) {
			b := forge(t, key)
			raw(t, snap, b)
			vouch(t, c, key, b)
		}},
		{"forged with another key", "not authenticated", false, func(t *testing.T, c *TestCache, key, snap string) {
			b := forge(t, key)
			raw(t, snap, cachemac.NewKey(bytes.Repeat([]byte{5}, 32), "policy").Seal(b, key+snapshotSuffix))
			vouch(t, c, key, b)
		}},
		{"not the verdict's", "SHA-256", false, func(t *testing.T, c *TestCache, key, snap string) { write(t, c, snap, forge(t, key)) }},
		{"truncated", "not authenticated", false, func(t *testing.T, c *TestCache, key, snap string) {
			b, _ := os.ReadFile(snap)
			raw(t, snap, b[:len(b)/2])
		}},
		{"another file's", "not this file's", false, func(t *testing.T, c *TestCache, key, snap string) {
			b := forge(t, strings.Repeat("0", 64))
			write(t, c, snap, b)
			vouch(t, c, key, b)
		}},
		{"undecodable", "decode", false, func(t *testing.T, c *TestCache, key, snap string) {
			b := []byte("not a snapshot")
			write(t, c, snap, b)
			vouch(t, c, key, b)
		}},
		{"mode 0660", "could have written", false, func(t *testing.T, c *TestCache, key, snap string) {
			b := forge(t, key)
			write(t, c, snap, b)
			vouch(t, c, key, b)
			chmod(t, snap, 0o660)
		}},
		{"another owner", "belongs to uid 65534", false, func(t *testing.T, c *TestCache, key, snap string) {
			b := forge(t, key)
			write(t, c, snap, b)
			vouch(t, c, key, b)
			chown(t, snap)
		}},
		{"symlink", "symbolic link", false, func(t *testing.T, c *TestCache, key, snap string) {
			b := forge(t, key)
			real := filepath.Join(t.TempDir(), "forged.snap")
			write(t, c, real, b)
			vouch(t, c, key, b)
			if err := os.Remove(snap); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, snap); err != nil {
				t.Fatal(err)
			}
		}},
		{"mode 0644: narrowed, trusted", "narrowed to 0600", true, func(t *testing.T, c *TestCache, key, snap string) {
			b := forge(t, key)
			write(t, c, snap, b)
			vouch(t, c, key, b)
			chmod(t, snap, 0o644)
		}},
		{"trusted", "", true, func(t *testing.T, c *TestCache, key, snap string) {
			b := forge(t, key)
			write(t, c, snap, b)
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
			if tc.trusted {
				if !FromSnapshot(p) || d.Effect != kernel.EffectAllow || !strings.Contains(p.TestVerdict().CacheNote, tc.note) {
					t.Fatalf("a forged snapshot sealed with the cache's key, with the right owner, mode, hash and key, is trusted (the boundary is the user's key); got %+v, %+v", d, p.TestVerdict())
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
