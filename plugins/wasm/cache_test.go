package wasm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/internal/testutil"
)

// syncBuffer is the shared concurrency-safe log sink.
type syncBuffer = testutil.SyncBuffer

// cacheEntries lists the compiled-code files under dir.
func cacheEntries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && entryRE.MatchString(d.Name()) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// helloRunner returns a function that starts a Host on a new cache
// directory (the same every time), logging to log, runs helloModule once
// and returns the directory.
func helloRunner(t *testing.T) func(log hclog.Logger) string {
	dir := filepath.Join(t.TempDir(), "cache")
	path := writeModule(t, helloModule(), "")
	return func(log hclog.Logger) string {
		t.Helper()
		h, err := NewHost(context.Background(), HostConfig{CacheDir: dir, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close(context.Background())
		tools, _ := load(t, h, ModuleConfig{Path: path})
		if got := tools.mustCall(t, "run", `{}`); got != "hello" {
			t.Fatalf("result %q", got)
		}
		return dir
	}
}

// TestCacheCorruption: a damaged compilation-cache entry is detected before
// wazero reads it, deleted, recompiled and recorded again; the module
// works. Without the check wazero would fail on a damaged executable
// ("checksum mismatch"), misread a damaged header, and could run garbage
// from damaged function offsets, which it does not check.
func TestCacheCorruption(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(b []byte) []byte
		reason  string
	}{
		{"header", func(b []byte) []byte { b[len(magicHeader())+9] ^= 0xff; return b }, "CRC-32C"},
		{"machine code", func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b }, "checksum mismatch"}, // wazero's own check
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, "size"},
		{"unlisted", nil, "not listed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := helloRunner(t)
			dir := run(nil)
			entries := cacheEntries(t, dir)
			if len(entries) != 1 {
				t.Fatalf("%d cache entries, want 1", len(entries))
			}
			good, err := os.ReadFile(entries[0])
			if err != nil {
				t.Fatal(err)
			}
			if tc.corrupt != nil {
				if err := os.WriteFile(entries[0], tc.corrupt(bytes.Clone(good)), 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				for _, f := range []string{sumFile, oldSumFile} {
					if err := os.Remove(filepath.Join(filepath.Dir(filepath.Dir(entries[0])), f)); err != nil {
						t.Fatal(err)
					}
				}
			}

			var logs syncBuffer
			run(hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn}))
			if !strings.Contains(logs.String(), "damaged or unverified; recompiling") || !strings.Contains(logs.String(), tc.reason) {
				t.Errorf("log %q does not report the repair (%s)", logs.String(), tc.reason)
			}
			again, err := os.ReadFile(entries[0])
			if err != nil || !bytes.Equal(again, good) {
				t.Fatalf("the entry was not recompiled to the original (%d bytes, want %d): %v", len(again), len(good), err)
			}

			logs = syncBuffer{}
			run(hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn}))
			if logs.String() != "" {
				t.Errorf("third load logged %q; the repaired entry should verify", logs.String())
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

func TestCacheDirIsPrivate(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := NewHost(context.Background(), HostConfig{CacheDir: shared}); err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("a cache directory others can reach was accepted: %v", err)
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

// TestCacheOldSums: an entries.sum of earlier versions (whole-file CRCs)
// still vouches for its entries: nothing is recompiled, and entries.crc is
// written.
func TestCacheOldSums(t *testing.T) {
	run := helloRunner(t)
	dir := run(nil)
	entries := cacheEntries(t, dir)
	if len(entries) != 1 {
		t.Fatalf("%d cache entries, want 1", len(entries))
	}
	modDir := filepath.Dir(filepath.Dir(entries[0]))
	sum, err := checksum(entries[0])
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(filepath.Dir(entries[0])) + "/" + filepath.Base(entries[0])
	old := fmt.Sprintf("%08x %d %s\n", sum.crc, sum.size, name)
	if err := os.WriteFile(filepath.Join(modDir, oldSumFile), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(modDir, sumFile)); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(entries[0])

	var logs syncBuffer
	run(hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn}))
	if logs.String() != "" {
		t.Errorf("loading with old sums logged %q", logs.String())
	}
	if st2, err := os.Stat(entries[0]); err != nil || !st2.ModTime().Equal(st.ModTime()) {
		t.Errorf("the entry was rewritten: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(modDir, sumFile))
	if err != nil {
		t.Fatalf("%s was not written: %v", sumFile, err)
	}
	want, _ := entrySum(entries[0])
	if !strings.Contains(string(b), fmt.Sprintf("%08x %d %s", want.crc, want.size, name)) {
		t.Errorf("%s %q does not list %s with its entrySum", sumFile, b, name)
	}
}
