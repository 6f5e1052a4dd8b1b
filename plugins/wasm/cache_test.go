package wasm

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/internal/cachemac"
	"github.com/agentkernel/agentkernel/internal/testutil"
)

// syncBuffer is the shared concurrency-safe log sink.
type syncBuffer = testutil.SyncBuffer

// cacheEntries lists the compiled-code files under dir (whatever their
// type: a planted link counts).
func cacheEntries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && entryRE.MatchString(d.Name()) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// onlyEntry is the one compiled entry of a cache directory.
func onlyEntry(t *testing.T, dir string) string {
	t.Helper()
	entries := cacheEntries(t, dir)
	if len(entries) != 1 {
		t.Fatalf("%d cache entries in %s, want 1", len(entries), dir)
	}
	return entries[0]
}

// textRunner returns a function that starts a Host on a new cache
// directory (the same every time), logging to log, runs textModule(text)
// once, and returns the directory and what the module wrote.
func textRunner(t *testing.T, text string) func(log hclog.Logger) (dir, out string) {
	dir := filepath.Join(t.TempDir(), "cache")
	path := writeModule(t, textModule(text), "")
	return func(log hclog.Logger) (string, string) {
		t.Helper()
		h, err := NewHost(context.Background(), HostConfig{CacheDir: dir, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close(context.Background())
		tools, _ := load(t, h, ModuleConfig{Path: path})
		return dir, tools.mustCall(t, "run", `{}`)
	}
}

// forgeCRC recomputes the CRC-32C wazero keeps behind an entry's machine
// code, as an attacker who edited the code does: wazero's own check then
// passes. The layout (wazero v1.12, engine_cache.go): "WAZEVO", version
// length, version, function count n (uint32), n offsets (uint64), code
// length (uint64), the code, its CRC (uint32), the rest.
func forgeCRC(b []byte) []byte {
	hdr := 6 + 1 + int(b[6]) + 4
	funcs := int(binary.LittleEndian.Uint32(b[hdr-4 : hdr]))
	codeAt := hdr + 8*funcs + 8
	code := int(binary.LittleEndian.Uint64(b[codeAt-8 : codeAt]))
	crc := crc32.Checksum(b[codeAt:codeAt+code], crc32.MakeTable(crc32.Castagnoli))
	binary.LittleEndian.PutUint32(b[codeAt+code:], crc)
	return b
}

// indexName is an entry's name in entries.mac, and modDir its module's
// cache directory.
func indexName(entry string) (modDir, name string) {
	return filepath.Dir(filepath.Dir(entry)), filepath.Base(filepath.Dir(entry)) + "/" + filepath.Base(entry)
}

// forgeIndex rewrites entries.mac for entry with content's size and a MAC
// made with key: what an attacker without the cache's key can do.
func forgeIndex(t *testing.T, entry string, content []byte, key *cachemac.Key) {
	t.Helper()
	modDir, name := indexName(entry)
	mac := key.SumLarge(cachemac.NewNonce(), content, filepath.Base(modDir), name, fmt.Sprint(len(content)))
	line := fmt.Sprintf("%s %d %s\n", hex.EncodeToString(mac), len(content), name)
	if err := os.WriteFile(filepath.Join(modDir, macFile), []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
}

var attackerKey = cachemac.NewKey(bytes.Repeat([]byte{0x42}, 32), "wasm")

// TestCacheForgedEntryNeverRuns is the red team's attack on the
// compilation cache, at the cache: another module's genuine compiled code
// (a valid wazero entry, CRC and all, whose code writes "PWNED") put in
// place of the "hello" module's entry, with entries.mac rewritten for it.
// The entry fails its MAC, is discarded with one warning and recompiled:
// the module writes "hello". Without the MAC the kernel runs the planted
// machine code, and the module writes "PWNED".
func TestCacheForgedEntryNeverRuns(t *testing.T) {
	run := textRunner(t, "hello")
	dir, out := run(nil)
	if out != "hello" {
		t.Fatalf("first run wrote %q", out)
	}
	entry := onlyEntry(t, dir)
	good, _ := os.ReadFile(entry)

	// The attacker's code, compiled by the same wazero for the same CPU:
	// same length of text, so the same layout.
	evilDir, pwned := textRunner(t, "PWNED")(nil)
	if pwned != "PWNED" {
		t.Fatalf("the attacker's module wrote %q", pwned)
	}
	evil, err := os.ReadFile(onlyEntry(t, evilDir))
	if err != nil || len(evil) != len(good) || bytes.Equal(evil, good) {
		t.Fatalf("the attacker's entry (%d bytes) is not a same-layout replacement of %d: %v", len(evil), len(good), err)
	}
	if err := os.WriteFile(entry, evil, 0o600); err != nil {
		t.Fatal(err)
	}
	forgeIndex(t, entry, evil, attackerKey)

	var logs syncBuffer
	if _, out := run(hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})); out != "hello" {
		t.Fatalf("the module wrote %q: the kernel ran the planted machine code", out)
	}
	if n := strings.Count(logs.String(), "failed its check and is discarded"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, logs.String())
	}
	if again, _ := os.ReadFile(entry); !bytes.Equal(again, good) {
		t.Error("the entry was not recompiled to the original")
	}
}

// TestCacheEntriesAuthenticated: every way an entry can differ from what
// the kernel wrote is caught before wazero reads it: the entry is
// discarded with one warning saying why, recompiled to the same bytes, and
// the next start is silent.
func TestCacheEntriesAuthenticated(t *testing.T) {
	type change func(t *testing.T, entry string, good []byte)
	write := func(t *testing.T, p string, b []byte) {
		t.Helper()
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		change change
		reason string
	}{
		{"header", func(t *testing.T, e string, good []byte) {
			b := bytes.Clone(good)
			b[len(magicHeader())+9] ^= 0xff // a function offset
			write(t, e, b)
		}, "MAC is not the one recorded"},
		{"machine code with wazero's CRC recomputed", func(t *testing.T, e string, good []byte) {
			b := bytes.Clone(good)
			b[len(b)/2] ^= 0xff
			write(t, e, forgeCRC(b))
		}, "MAC is not the one recorded"},
		{"machine code and index forged", func(t *testing.T, e string, good []byte) {
			b := bytes.Clone(good)
			b[len(b)/2] ^= 0xff
			b = forgeCRC(b)
			write(t, e, b)
			forgeIndex(t, e, b, attackerKey)
		}, "MAC is not the one recorded"},
		{"truncated", func(t *testing.T, e string, good []byte) {
			write(t, e, good[:len(good)/2])
		}, "size"},
		{"unlisted", func(t *testing.T, e string, good []byte) {
			modDir, _ := indexName(e)
			os.Remove(filepath.Join(modDir, macFile))
		}, "not listed"},
		{"another machine's key", func(t *testing.T, e string, good []byte) {
			// The same entry, listed with a MAC of another key: what a
			// cache copied from another machine (or user) holds.
			forgeIndex(t, e, good, cachemac.NewKey(bytes.Repeat([]byte{7}, 32), "wasm"))
		}, "MAC is not the one recorded"},
		{"this cache's MAC for another module", func(t *testing.T, e string, good []byte) {
			// A genuine line moved: the MAC binds the module's hash and
			// the entry's name.
			modDir, name := indexName(e)
			last := "0"
			if strings.HasSuffix(name, last) {
				last = "1"
			}
			b, _ := os.ReadFile(filepath.Join(modDir, macFile))
			write(t, filepath.Join(modDir, macFile), []byte(strings.Replace(string(b), name, name[:len(name)-1]+last, 1)))
			os.Rename(e, e[:len(e)-1]+last)
		}, "MAC is not the one recorded"},
		{"a symbolic link to a genuine copy", func(t *testing.T, e string, good []byte) {
			elsewhere := filepath.Join(t.TempDir(), "entry")
			write(t, elsewhere, good)
			os.Remove(e)
			os.Symlink(elsewhere, e)
		}, "symbolic link"},
		{"writable by others", func(t *testing.T, e string, good []byte) {
			os.Chmod(e, 0o666)
		}, "other users could have written it"},
	}
	if os.Geteuid() == 0 {
		cases = append(cases, struct {
			name   string
			change change
			reason string
		}{"copied from another user", func(t *testing.T, e string, good []byte) {
			os.Lchown(e, 65534, 65534)
		}, "belongs to uid 65534"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := textRunner(t, "hello")
			dir, _ := run(nil)
			entry := onlyEntry(t, dir)
			good, err := os.ReadFile(entry)
			if err != nil {
				t.Fatal(err)
			}
			tc.change(t, entry, good)

			var logs syncBuffer
			if _, out := run(hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})); out != "hello" {
				t.Fatalf("wrote %q", out)
			}
			if n := strings.Count(logs.String(), "failed its check and is discarded"); n != 1 || !strings.Contains(logs.String(), tc.reason) {
				t.Errorf("log does not report one discard (%s):\n%s", tc.reason, logs.String())
			}
			again, err := os.ReadFile(entry)
			if err != nil || !bytes.Equal(again, good) {
				t.Fatalf("the entry was not recompiled to the original (%d bytes, want %d): %v", len(again), len(good), err)
			}
			if fi, _ := os.Lstat(entry); !fi.Mode().IsRegular() {
				t.Errorf("the entry is a %v", fi.Mode().Type())
			}

			logs = syncBuffer{}
			run(hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn}))
			if logs.String() != "" {
				t.Errorf("third load logged %q; the recompiled entry should verify", logs.String())
			}
		})
	}
}

// magicHeader is the start of a wazero cache entry: magic, version length,
// version, function count. Offsets follow it.
func magicHeader() []byte {
	v := wazeroSeenVersion()
	return append(append([]byte("WAZEVO"), byte(len(v))), append([]byte(v), 0, 0, 0, 0)...)
}

// TestCacheFormatIsVersioned: entries live under v2/ with their key; what
// an older kernel keeps beside it (wazero-<version>/ with entries.crc) is
// neither read nor changed, so kernels of both formats can share the
// directory without recompiling each other's entries away.
func TestCacheFormatIsVersioned(t *testing.T) {
	run := textRunner(t, "hello")
	dir, _ := run(nil)
	entry := onlyEntry(t, filepath.Join(dir, cacheFormat))
	if _, err := os.Stat(filepath.Join(dir, cacheFormat, cachemac.KeyFile)); err != nil {
		t.Fatalf("no key in the format's directory: %v", err)
	}
	old := filepath.Join(dir, "wazero-"+wazeroVersion, strings.Repeat("a", 64))
	os.MkdirAll(filepath.Join(old, "wazero-dev-amd64-linux"), 0o700)
	oldEntry := filepath.Join(old, "wazero-dev-amd64-linux", strings.Repeat("b", 64))
	os.WriteFile(oldEntry, []byte("an older kernel's entry"), 0o600)
	os.WriteFile(filepath.Join(old, "entries.crc"), []byte("00000000 23 x\n"), 0o600)
	st, _ := os.Stat(entry)

	var logs syncBuffer
	run(hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn}))
	if logs.String() != "" {
		t.Errorf("logged %q", logs.String())
	}
	if b, err := os.ReadFile(oldEntry); err != nil || string(b) != "an older kernel's entry" {
		t.Errorf("the older format's entry changed: %q %v", b, err)
	}
	if st2, _ := os.Stat(entry); !st2.ModTime().Equal(st.ModTime()) {
		t.Error("our entry was recompiled")
	}
}

func TestCacheDirIsPrivate(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.MkdirAll(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o777)
	if _, err := NewHost(context.Background(), HostConfig{CacheDir: shared}); err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("a cache directory others can write was accepted: %v", err)
	}

	// Private by mode but made by someone else (say in /tmp, before us):
	// refused, since its owner can fill it. Needs root to give it away.
	if os.Geteuid() == 0 {
		theirs := filepath.Join(t.TempDir(), "theirs")
		if err := os.Mkdir(theirs, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := NewHost(context.Background(), HostConfig{CacheDir: theirs}); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Fatalf("a cache directory owned by another user was accepted: %v", err)
		}
	}

	dir := filepath.Join(t.TempDir(), "new", "cache")
	h, err := NewHost(context.Background(), HostConfig{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	load(t, h, ModuleConfig{Path: writeModule(t, helloModule(), "")})
	err = filepath.WalkDir(filepath.Dir(dir), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() && st.Mode().Perm() != 0o700 {
			t.Errorf("%s has mode %v, want 0700", p, st.Mode().Perm())
		}
		if !d.IsDir() && st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v, readable by others", p, st.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWazeroVersion keeps the cache key's wazero version in step with
// go.mod.
func TestWazeroVersion(t *testing.T) {
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	want := "github.com/tetratelabs/wazero " + wazeroVersion
	if !strings.Contains(string(b), want) {
		t.Fatalf("go.mod does not require %q: update wazeroVersion in cache.go", want)
	}
}

// TestMakeTestSharesTheKernelsEntries: under `make test` the test binaries
// are linked with go.mod's wazero version (the Makefile's TEST_LDFLAGS),
// so their wazero reads the entries `make wasm` compiled for the kernel
// instead of compiling every module again for "dev". Outside make (a
// plain go test) there is nothing to check: the binary says "dev" and
// its TestMain precompiles for that.
func TestMakeTestSharesTheKernelsEntries(t *testing.T) {
	if os.Getenv("AGENTKERNEL_REQUIRE_ARTIFACTS") != "1" {
		t.Skip("not under make test (AGENTKERNEL_REQUIRE_ARTIFACTS=1)")
	}
	if v := wazeroSeenVersion(); v != wazeroVersion {
		t.Errorf("this test binary's wazero says %q, the kernel's %q: make test must link the tests with -X github.com/tetratelabs/wazero/internal/version.version=%s", v, wazeroVersion, wazeroVersion)
	}
}

// TestMakefileStampsFollowTheFormat: make's precompile stamps live in the
// format's directory, so that a new format is precompiled again rather
// than skipped on the old format's stamps.
func TestMakefileStampsFollowTheFormat(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if want := "STAMPS      := $(WASM_CACHE)/" + cacheFormat + "/make-stamps$(CURDIR)"; !strings.Contains(string(b), want) {
		t.Errorf("the Makefile does not set %q: the stamps must follow cacheFormat", want)
	}
}

// TestTextFixtures keeps testdata/text/{hello,pwned}.wasm, the modules
// cmd/kernel's cache attack test plants into each other's cache entries,
// equal to textModule's output (go test -run TestTextFixtures -update
// writes them). Each has its tool.json beside it.
func TestTextFixtures(t *testing.T) {
	for _, text := range []string{"hello", "PWNED"} {
		dir := filepath.Join("testdata", "text", strings.ToLower(text))
		testutil.Golden(t, filepath.Join(dir, "text.wasm"), string(textModule(text)), *update)
		testutil.Golden(t, filepath.Join(dir, ManifestFile), `{"name": "text", "tools": [{"name": "run", "description": "Writes `+strings.ToLower(text)+`.", "tier": "read_only"}]}`+"\n", *update)
	}
}
