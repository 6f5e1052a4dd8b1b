package subprocess

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/cachemac"
	"github.com/agentkernel/agentkernel/internal/privfile"
)

// The binary store keeps the verified copies of pinned plugin binaries
// between kernel processes, so that a kernel (re)start whose pinned binary
// was verified once executes that copy without copying and hashing the
// binary again (RATIONALE.md, "Go plugin start: verified copies outlive
// the process (issue 45)").
//
//	<StateDir>/plugins/bin/             0700 (privfile.Dir)
//	<StateDir>/plugins/bin/v1/          0700, with the store's MAC key
//	<StateDir>/plugins/bin/v1/<sha256>      the verified copy, 0500
//	<StateDir>/plugins/bin/v1/<sha256>.rec  its record, sealed (cachemac)
//
// An entry is named by the sha256 it was verified against, so a pin that
// changes names another entry. It is trusted on exactly what the host's
// per-process copy is trusted on: a directory only the kernel's user can
// use holds it between the hash and the exec. At use it must still be what
// the host installed: a regular file (Lstat: never through a link) owned by
// the kernel's user, mode 0500, one link, and the size, device, inode and
// change time its sealed record names; a write to it, a chmod, a rename or
// link over it change one of these. Anything else is ignored (removed:
// the directory is ours) and the binary is verified from its path again.

const (
	// binStoreFormat is the directory of this format in the store.
	binStoreFormat = "v1"
	// binStoreKeep is how long an entry nobody used stays in the store.
	binStoreKeep = 30 * 24 * time.Hour
	// binStoreMax is the most entries the store keeps: beyond it, the
	// least recently used go.
	binStoreMax = 16
	// binStoreTouch is how stale an entry's last-use time may grow
	// before a use records itself (one write a day, not one per start).
	binStoreTouch = 24 * time.Hour
	// binStoreTempAge is the age of a temporary file (an install a
	// killed process left) the sweep removes.
	binStoreTempAge = time.Hour
	// binStoreTemp starts the names of installs in progress.
	binStoreTemp = ".tmp-"
)

// binStore is a Host's store of verified copies.
type binStore struct {
	dir string
	mac *cachemac.Key
}

// binRecord is what an entry's sealed record says about it.
type binRecord struct {
	Format string `json:"format"`
	SHA256 string `json:"sha256"`
	fileID
}

// fileID is what identifies the file the host installed; any change to
// the file changes one of these (the change time cannot be set back).
type fileID struct {
	Size  int64  `json:"size"`
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Ctime int64  `json:"ctime_ns"`
}

// binStore returns the host's store, or nil when it has none (no
// StateDir, a system without the file identity the check needs, or a
// store directory that failed its checks: then the host copies into its
// private directory, as without a store, and says why once).
func (h *Host) binStore() *binStore {
	h.storeOnce.Do(func() {
		if h.cfg.StateDir == "" || !haveFileID {
			return
		}
		warn := func(msg string) { h.log.Warn(msg) }
		parent := filepath.Join(h.cfg.StateDir, "plugins", "bin")
		dir := filepath.Join(parent, binStoreFormat)
		err := privfile.Dir(parent, "the plugin binary store", warn)
		if err == nil {
			err = privfile.Dir(dir, "the plugin binary store", warn)
		}
		var mac *cachemac.Key
		if err == nil {
			mac, err = cachemac.Open(dir, "plugin-bin", warn)
		}
		if err != nil {
			h.log.Warn("plugin binary store disabled; verifying every binary at every start", "error", err)
			return
		}
		h.store = &binStore{dir: dir, mac: mac}
	})
	return h.store
}

// verified returns the verified copy of cfg's binary to execute and its
// sha256 (verifyCopy's), and whether it is the store's entry (which
// nobody may remove but the store). fresh verifies the binary at cfg.Path
// even when the store holds its pin's entry (Verify: `kernel plugins
// verify` reports what is at the path; an entry that checks is kept, as
// install says). Interpreted plugins, and a host
// without a store, get a copy in the host's private directory.
func (h *Host) verified(cfg PluginConfig, fresh bool) (exe, sum string, stored bool, err error) {
	st := h.binStore()
	if cfg.Interpreter != nil || st == nil || cfg.SHA256 == "" {
		exe, sum, err = verifyCopy(cfg, h.dir)
		return exe, sum, false, err
	}
	if !fresh {
		if p, ok := st.lookup(cfg.SHA256, h.log); ok {
			h.storeHits.Add(1)
			return p, cfg.SHA256, true, nil
		}
	}
	p, sum, err := st.install(cfg)
	if err == nil {
		return p, sum, true, nil
	}
	var he *HashError
	if errors.As(err, &he) {
		return "", sum, false, err
	}
	// The store failed (or the binary did, which the copy below says
	// again): the private directory loses nothing.
	h.log.Warn("plugin binary store: install failed; using a private copy", "plugin", cfg.Name, "error", err)
	exe, sum, err = verifyCopy(cfg, h.dir)
	return exe, sum, false, err
}

// entry is the path of the entry of sum.
func (s *binStore) entry(sum string) string { return filepath.Join(s.dir, sum) }

// lookup returns the entry of pin if it is the file the store installed;
// an entry that is not (or whose record is not) is removed and logged.
func (s *binStore) lookup(pin string, log interface{ Warn(string, ...any) }) (string, bool) {
	p := s.entry(pin)
	rec, err := s.readRecord(pin)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err == nil {
		err = checkEntry(p, rec)
	}
	if err != nil {
		// Under the lock, an install in progress (renamed in, record not
		// yet written) is not mistaken for a bad entry: look again.
		unlock, lerr := privfile.Lock(filepath.Join(s.dir, ".lock"))
		if lerr != nil {
			return "", false
		}
		defer unlock()
		if rec, err2 := s.readRecord(pin); err2 == nil && checkEntry(p, rec) == nil {
			err = nil
		} else {
			log.Warn("plugin binary store entry ignored; verifying the binary again", "path", p, "reason", err)
			s.remove(pin)
			return "", false
		}
	}
	s.touch(p)
	return p, true
}

// touch records a use of the entry p: its record's modification time is
// the entry's last use (the sweep reads it), written at most once a day.
func (s *binStore) touch(p string) {
	if fi, err := os.Lstat(p + ".rec"); err == nil && time.Since(fi.ModTime()) > binStoreTouch {
		now := time.Now()
		_ = os.Chtimes(p+".rec", now, now)
	}
}

// checkEntry says why the file at p is not the one rec describes, or nil.
func checkEntry(p string, rec binRecord) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	if m := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky); m != 0o500 {
		return fmt.Errorf("mode %s, not -r-x------", fi.Mode())
	}
	id, uid, nlink := statID(fi)
	if uid != os.Geteuid() {
		return fmt.Errorf("owned by uid %d, not the kernel's %d", uid, os.Geteuid())
	}
	if nlink != 1 {
		return fmt.Errorf("%d hard links, not 1", nlink)
	}
	if id != rec.fileID {
		return fmt.Errorf("changed since it was verified (size, device, inode or change time differ from its record)")
	}
	return nil
}

// readRecord reads and authenticates the record of sum.
func (s *binStore) readRecord(sum string) (binRecord, error) {
	name := sum + ".rec"
	b, err := privfile.ReadFile(filepath.Join(s.dir, name), 4096, nil)
	if err != nil {
		return binRecord{}, err
	}
	b, err = s.mac.Unseal(b, name)
	if err != nil {
		return binRecord{}, fmt.Errorf("record: %w", err)
	}
	var rec binRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Format != binStoreFormat || rec.SHA256 != sum {
		return binRecord{}, fmt.Errorf("record: not this entry's")
	}
	return rec, nil
}

// remove deletes the entry of sum and its record.
func (s *binStore) remove(sum string) {
	_ = os.Remove(s.entry(sum))
	_ = os.Remove(s.entry(sum) + ".rec")
}

// install verifies cfg's binary from its path into the store (the copy is
// hashed as it is written, checked against the pin and made 0500 by
// copyVerified, under a temporary name), then renames it in and seals its
// record, under the store's lock; then it sweeps. It returns the entry.
//
// An entry of the same sum that passes its check is kept, and the new
// copy dropped: it holds the same verified bytes (its name is their
// sum), and another start, of this kernel or another one sharing the
// store, may have checked it and be about to run it. Renaming over it
// would unlink the file that start's launcher has opened to bind into
// its view, and the bind fails (ENOENT: a mount's source must not be
// unlinked; sandbox/view_linux.go's bind), so the start fails.
func (s *binStore) install(cfg PluginConfig) (string, string, error) {
	tmp, sum, err := copyVerifiedAs(cfg, s.dir, binStoreTemp+cfg.Name+"-*")
	if err != nil {
		return "", sum, err
	}
	defer os.Remove(tmp) // gone once renamed
	unlock, err := privfile.Lock(filepath.Join(s.dir, ".lock"))
	if err != nil {
		return "", sum, err
	}
	defer unlock()
	p := s.entry(sum)
	if rec, err := s.readRecord(sum); err == nil && checkEntry(p, rec) == nil {
		s.touch(p)
		s.sweep(sum, time.Now())
		return p, sum, nil
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", sum, err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return "", sum, err
	}
	id, _, _ := statID(fi)
	b, err := json.Marshal(binRecord{Format: binStoreFormat, SHA256: sum, fileID: id})
	if err != nil {
		return "", sum, err
	}
	if err := privfile.WriteFile(p+".rec", s.mac.Seal(b, sum+".rec"), false); err != nil {
		s.remove(sum)
		return "", sum, err
	}
	s.sweep(sum, time.Now())
	return p, sum, nil
}

// sweep removes, under the store's lock, what the store no longer needs:
// entries unused for binStoreKeep (their record's modification time), the
// least recently used beyond binStoreMax unless used within binStoreTouch,
// entries without a record, and
// temporary files older than binStoreTempAge (a killed install's). keep
// is the entry just installed. It runs after each install only, which
// already paid a hash: a start from the store never lists the directory.
func (s *binStore) sweep(keep string, now time.Time) {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	type used struct {
		sum  string
		last time.Time
	}
	var live []used
	recs := map[string]bool{}
	for _, de := range des {
		if sum, ok := strings.CutSuffix(de.Name(), ".rec"); ok && isSum(sum) {
			recs[sum] = true
		}
	}
	for _, de := range des {
		name := de.Name()
		fi, err := de.Info()
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, binStoreTemp) || strings.Contains(name, ".tmp-"):
			if now.Sub(fi.ModTime()) > binStoreTempAge {
				_ = os.Remove(filepath.Join(s.dir, name))
			}
		case isSum(name) && !recs[name]:
			_ = os.Remove(filepath.Join(s.dir, name))
		case strings.HasSuffix(name, ".rec") && isSum(strings.TrimSuffix(name, ".rec")):
			sum := strings.TrimSuffix(name, ".rec")
			if sum == keep {
				continue
			}
			if now.Sub(fi.ModTime()) > binStoreKeep {
				s.remove(sum)
				continue
			}
			live = append(live, used{sum, fi.ModTime()})
		}
	}
	if len(live) >= binStoreMax {
		slices.SortFunc(live, func(a, b used) int { return b.last.Compare(a.last) })
		for _, u := range live[binStoreMax-1:] {
			// One used within binStoreTouch may be about to start in a
			// running kernel (a use touches a record older than that):
			// it stays, and the store is over its bound until it ages.
			if now.Sub(u.last) > binStoreTouch {
				s.remove(u.sum)
			}
		}
	}
}

// isSum reports whether name is 64 lowercase hex digits.
func isSum(name string) bool {
	if len(name) != 64 {
		return false
	}
	for _, c := range name {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
