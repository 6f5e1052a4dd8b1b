//go:build linux

package subprocess_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentkernel/agentkernel/plugins/subprocess"
)

// storedPlugin is the misbehave plugin, pinned, at a path of its own (so
// a test can remove it), and the binary store's directory under state.
func storedPlugin(t *testing.T) (cfg subprocess.PluginConfig, state, entry string) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "mb")
	copyFile(t, misbehave.path, src, 0o755)
	cfg = misbehaveConfig()
	cfg.Path = src
	cfg.Start = subprocess.StartEager
	state = t.TempDir()
	return cfg, state, filepath.Join(state, "plugins", "bin", "v1", misbehave.sum)
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// loadAndCall loads cfg in a new host over state (a kernel start) and
// calls its noop tool; it returns the host's store hits and its log.
func loadAndCall(t *testing.T, cfg subprocess.PluginConfig, state string) (int64, string) {
	t.Helper()
	var log logBuffer
	h := newHost(t, subprocess.HostConfig{StateDir: state, Logger: hclogTo(&log)})
	tools := load(t, h, cfg)
	mustCall(t, tools["mb.noop"], `{}`)
	hits := subprocess.StoreHits(h)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	return hits, log.String()
}

// TestStoreSecondStartSkipsVerification: a kernel start whose pinned
// binary an earlier start verified runs the stored copy without reading
// the binary at its path: the path is removed after the first start, so
// the second start could not have copied or hashed it, and it still runs
// the plugin (what runs is the copy verified against the pin). `kernel
// plugins verify` (Verify) still reads the path and says it is gone; a
// pin that changes names no entry, so it is verified, and refused.
func TestStoreSecondStartSkipsVerification(t *testing.T) {
	cfg, state, entry := storedPlugin(t)
	if hits, _ := loadAndCall(t, cfg, state); hits != 1 {
		// The install, then the check before the start.
		t.Fatalf("first start: %d store hits, want 1 (the check before its exec)", hits)
	}
	fi, err := os.Lstat(entry)
	if err != nil || fi.Mode().Perm() != 0o500 {
		t.Fatalf("no 0500 entry after the first start: %v %v", fi, err)
	}
	if err := os.Remove(cfg.Path); err != nil {
		t.Fatal(err)
	}
	if hits, log := loadAndCall(t, cfg, state); hits != 2 || strings.Contains(log, "ignored") {
		t.Fatalf("second start, binary gone: %d store hits (want 2: load and start)\n%s", hits, log)
	}
	h := newHost(t, subprocess.HostConfig{StateDir: state})
	if _, err := h.Verify(testCtx(t), cfg); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Verify of a removed binary answered from the store: %v", err)
	}
	copyFile(t, misbehave.path, cfg.Path, 0o755)
	wrong := cfg
	wrong.SHA256 = strings.Repeat("ab", 32)
	var he *subprocess.HashError
	if _, err := h.Load(testCtx(t), wrong); !errors.As(err, &he) || he.Actual != misbehave.sum {
		t.Fatalf("wrong pin with a stored entry of the right one: %v", err)
	}
}

// TestStoreEntryNotTrusted: an entry that is not the file the store
// installed is never executed: the host says why, removes it, verifies
// the binary from its path again, and the next start (binary gone) runs
// the new entry. Each case fails if its check in checkEntry (or the
// record's MAC) is removed: the start then takes the entry silently.
func TestStoreEntryNotTrusted(t *testing.T) {
	for name, tc := range map[string]struct {
		plant func(t *testing.T, entry string)
		why   string
	}{
		"writable": {func(t *testing.T, entry string) { chmod(t, entry, 0o700) }, "mode -rwx------"},
		"setuid":   {func(t *testing.T, entry string) { chmod(t, entry, 0o500|os.ModeSetuid) }, "mode ur-x------"},
		"edited, mode restored": {func(t *testing.T, entry string) {
			chmod(t, entry, 0o700)
			f, err := os.OpenFile(entry, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := f.Stat()
			if _, err := f.WriteAt([]byte("PWNED"), fi.Size()/2); err != nil {
				t.Fatal(err)
			}
			f.Close()
			chmod(t, entry, 0o500)
		}, "changed since it was verified"},
		"replaced by a copy": {func(t *testing.T, entry string) {
			other := entry + ".new"
			copyFile(t, misbehave.path, other, 0o500)
			if err := os.Rename(other, entry); err != nil {
				t.Fatal(err)
			}
		}, "changed since it was verified"},
		"hard-linked": {func(t *testing.T, entry string) {
			if err := os.Link(entry, filepath.Join(filepath.Dir(entry), "elsewhere")); err != nil {
				t.Fatal(err)
			}
		}, "2 hard links"},
		"symbolic link": {func(t *testing.T, entry string) {
			other := filepath.Join(t.TempDir(), "mb")
			copyFile(t, misbehave.path, other, 0o500)
			if err := os.Remove(entry); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, entry); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		"replaced, record forged": {func(t *testing.T, entry string) {
			// What an attacker able to write the store would plant: a
			// file of its own and a record that describes it, without
			// the store's key.
			other := entry + ".new"
			copyFile(t, misbehave.path, other, 0o500)
			if err := os.Rename(other, entry); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(entry)
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			rec := fmt.Sprintf(`{"format":"v1","sha256":%q,"size":%d,"dev":%d,"ino":%d,"ctime_ns":%d}`, misbehave.sum, fi.Size(), st.Dev, st.Ino, st.Ctim.Nano())
			if err := os.WriteFile(entry+".rec", []byte(rec), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not authenticated"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, state, entry := storedPlugin(t)
			loadAndCall(t, cfg, state)
			tc.plant(t, entry)
			_, log := loadAndCall(t, cfg, state)
			if !strings.Contains(log, "store entry ignored") || !strings.Contains(log, tc.why) {
				t.Fatalf("the planted entry was not refused (want %q):\n%s", tc.why, log)
			}
			fi, err := os.Lstat(entry)
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o500 {
				t.Fatalf("not verified again into a new entry: %v %v", fi, err)
			}
			if err := os.Remove(cfg.Path); err != nil {
				t.Fatal(err)
			}
			if hits, log := loadAndCall(t, cfg, state); hits != 2 {
				t.Fatalf("the new entry is not used (%d hits):\n%s", hits, log)
			}
		})
	}
}

func chmod(t *testing.T, p string, m os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, m); err != nil {
		t.Fatal(err)
	}
}

// TestStoreCheckedBeforeEveryStart: the entry is checked again before
// each process start, a restart after a crash included, not only at Load.
// One made writable while the plugin runs is refused at the restart and
// verified again from the path; one swept away is verified again from
// the path; and with neither an entry nor a binary that matches the pin
// at the path, the restart fails with the pin's mismatch: nothing
// unverified runs.
func TestStoreCheckedBeforeEveryStart(t *testing.T) {
	cfg, state, entry := storedPlugin(t)
	cfg.Restart = subprocess.RestartPolicy{MaxCrashes: 100, Backoff: subprocess.Duration(time.Millisecond)}
	var log logBuffer
	h := newHost(t, subprocess.HostConfig{StateDir: state, Logger: hclogTo(&log)})
	tools := load(t, h, cfg)
	crash := func() {
		t.Helper()
		p := pidOf(t, tools)
		if _, err := call(t, tools["mb.crash"], `{"text":"x"}`); !errors.Is(err, subprocess.ErrCrashed) {
			t.Fatalf("crash: %v", err)
		}
		waitNSDead(t, 5*time.Second, p.NS)
	}

	chmod(t, entry, 0o700)
	crash()
	if got := mustCall(t, tools["mb.echo"], `{"text":"back"}`); got != "back" {
		t.Fatalf("echo after the restart = %q", got)
	}
	if !strings.Contains(log.String(), "store entry ignored") || !strings.Contains(log.String(), "mode -rwx------") {
		t.Fatalf("the restart took the writable entry:\n%s", log.String())
	}
	if fi, err := os.Lstat(entry); err != nil || fi.Mode().Perm() != 0o500 {
		t.Fatalf("not verified again into the store: %v %v", fi, err)
	}

	for _, p := range []string{entry, entry + ".rec"} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	crash()
	if got := mustCall(t, tools["mb.echo"], `{"text":"again"}`); got != "again" {
		t.Fatalf("echo after a restart without an entry = %q", got)
	}
	if _, err := os.Lstat(entry); err != nil {
		t.Fatalf("a restart without an entry did not verify into the store: %v", err)
	}

	for _, p := range []string{entry, entry + ".rec", cfg.Path} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(cfg.Path, []byte("\x7fELF not the pinned binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	crash()
	_, err := call(t, tools["mb.echo"], `{"text":"x"}`)
	if err == nil || !strings.Contains(err.Error(), "sha256 mismatch") || !strings.Contains(err.Error(), misbehave.sum) {
		t.Fatalf("a restart with a changed binary and no entry: %v", err)
	}
}

// TestStoreInstallKeepsCheckedEntry: verifying a binary whose entry is
// in the store and checks (`kernel plugins verify`, or a start that
// raced another's install) keeps that entry, the same file, still linked:
// another start may have checked it and opened it to bind it into its
// launcher's view (sandbox/view_linux.go: open, then open_tree and
// move_mount), and a rename over it unlinks that file, so the bind fails
// with ENOENT and the start with "it closed its stdout without the
// go-plugin handshake" (the flake of TestStoreConcurrentStarts). An
// entry that fails its check is still replaced.
func TestStoreInstallKeepsCheckedEntry(t *testing.T) {
	cfg, state, entry := storedPlugin(t)
	loadAndCall(t, cfg, state)
	before := inode(t, entry)
	// What a launcher holds while it builds its view.
	fd, err := syscall.Open(entry, unix.O_PATH|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	h := newHost(t, subprocess.HostConfig{StateDir: state})
	if rep, err := h.Verify(testCtx(t), cfg); err != nil || rep.SHA256 != misbehave.sum || len(rep.Tools) == 0 {
		t.Fatalf("verify over a stored entry: %+v %v", rep, err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	if after := inode(t, entry); after != before || st.Nlink != 1 {
		t.Fatalf("verify replaced the entry a start may be running (inode %d -> %d; the opened file has %d links)", before, after, st.Nlink)
	}
	if hits, log := loadAndCall(t, cfg, state); hits != 2 {
		t.Fatalf("the kept entry is not used (%d hits):\n%s", hits, log)
	}

	// A change (a chmod there and back changes its change time): the
	// entry fails its check, and verifying replaces it.
	for _, m := range []os.FileMode{0o700, 0o500} {
		if err := os.Chmod(entry, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.Verify(testCtx(t), cfg); err != nil {
		t.Fatal(err)
	}
	if inode(t, entry) == before {
		t.Fatal("verify kept an entry that fails its check")
	}
	if hits, log := loadAndCall(t, cfg, state); hits != 2 {
		t.Fatalf("the replaced entry is not used (%d hits):\n%s", hits, log)
	}
}

// inode is the inode number of the file at p.
func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestStoreConcurrentStarts: kernels starting at once over one store
// (each a host; half verify from the path, which always installs, half
// load) all start the plugin, and leave one entry that the next start
// uses with the binary gone.
func TestStoreConcurrentStarts(t *testing.T) {
	cfg, state, _ := storedPlugin(t)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := subprocess.NewHost(subprocess.HostConfig{StateDir: state})
			defer h.Close()
			var err error
			if i%2 == 0 {
				_, err = h.Verify(testCtx(t), cfg)
			} else {
				_, err = h.Load(testCtx(t), cfg)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if err := os.Remove(cfg.Path); err != nil {
		t.Fatal(err)
	}
	if hits, log := loadAndCall(t, cfg, state); hits != 2 {
		t.Fatalf("after concurrent installs the entry is not used (%d hits):\n%s", hits, log)
	}
}
