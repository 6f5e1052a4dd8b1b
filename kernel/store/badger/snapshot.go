package badger

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	bdg "github.com/dgraph-io/badger/v4"
)

// Badger cannot open a store read-only while a writer holds it (the
// writer's exclusive flock excludes the reader's shared one), nor one whose
// last writer crashed (its memtable log needs a truncation, which a reader
// may not do). A read-only Open of a store held by a writer asks the
// writer (serve.go); when no writer answers — a crashed writer's store, or
// a writer without a socket — it reads a snapshot instead: a private copy
// of the store, made inside the store directory (or in $TMPDIR when this
// user may not write the store directory), opened read-write (which
// recovers the copied logs) and removed at Close. No file of the store
// itself is ever written.
//
// Every file is copied, never hard-linked: Badger deletes a table by
// truncating it to zero bytes first, and a link shares the inode, so a
// reader that mapped a linked table died with SIGBUS when the writer
// compacted it away. A file truncated while it is copied is detected (its
// size changed) and the copy retried.
//
// The copy is consistent because of the order of the steps, given how a
// Badger writer changes its files:
//
//  1. the memtable logs (*.mem) are copied first: they hold every write
//     not yet flushed to a table;
//  2. then MANIFEST (the list of live tables) and KEYREGISTRY;
//  3. then every table (*.sst, immutable) is copied: a memtable flushed
//     after step 1 is in a table that MANIFEST may or may not list, and both
//     are fine; a table compacted away after step 2 is missing, and Badger
//     refuses the copy ("file does not exist"): retry;
//  4. then the value logs (*.vlog, append-only): a superset of what the
//     copied pointers need, unless value-log GC deleted one meanwhile,
//     which the before/after file lists show: retry.
//
// A log copied while it is being written ends in a torn entry, which the
// checksums detect and recovery drops: the snapshot then misses at most
// writes that were still in flight when it was taken.
const snapshotPrefix = ".snapshot-"

// openSnapshot opens a snapshot of the store in dir.
func openSnapshot(dir string, opts Options, t tuning) (*Store, error) {
	var last error
	for range 5 {
		snap, lock, err := copyStore(dir)
		if err != nil {
			last = err
			continue
		}
		// No compaction in the copy, and so no reason to stall its flushes.
		bo := opts.badgerOptions(snap, t).WithReadOnly(false).WithLogger(nil).
			WithNumCompactors(0).WithNumLevelZeroTables(1000).WithNumLevelZeroTablesStall(1001).WithCompactL0OnClose(false)
		db, err := bdg.Open(bo)
		if err != nil {
			removeSnapshot(snap, lock)
			last = err
			continue
		}
		opts.ReadOnly = true
		return &Store{dir: dir, snapshot: snap, snapLock: lock, db: db, opts: opts, reserve: -1, stop: make(chan struct{})}, nil
	}
	return nil, fmt.Errorf("open session store %s read-only: a writer holds it or did not close it, and taking a snapshot failed: %w", dir, last)
}

// snapshotLock is the file in a snapshot directory its reader holds an
// exclusive flock on while it uses the snapshot: a directory whose lock is
// free belongs to a reader that is gone.
const snapshotLock = ".reader"

// copyFault, when set (by tests), is called before each step of
// copyStore and fails the copy with the error it returns.
var copyFault func(step string) error

// copyStore makes the snapshot copy of dir and returns its directory and
// the locked file that marks it in use. On error nothing is left behind.
func copyStore(dir string) (snap string, lock *os.File, err error) {
	fault := func(step string) error {
		if copyFault != nil {
			return copyFault(step)
		}
		return nil
	}
	if err := fault("list"); err != nil {
		return "", nil, err
	}
	vlogsBefore, err := filesWithSuffix(dir, ".vlog")
	if err != nil {
		return "", nil, err
	}
	if err := fault("mkdir"); err != nil {
		return "", nil, err
	}
	snap, err = os.MkdirTemp(dir, snapshotPrefix)
	if err != nil { // a directory this user may not write: copy to $TMPDIR
		if snap, err = os.MkdirTemp("", "agentkernel"+snapshotPrefix); err != nil {
			return "", nil, err
		}
	}
	// The deferred cleanup reads the directory from its own variable: a
	// "return "", nil, err" clears the named results before it runs.
	made := snap
	defer func() {
		if err != nil {
			removeSnapshot(made, lock)
			snap, lock = "", nil
		}
	}()
	if err = fault("lock"); err != nil {
		return "", nil, err
	}
	if lock, err = lockSnapshot(snap); err != nil {
		return "", nil, err
	}
	steps := []string{".mem", "MANIFEST", "KEYREGISTRY", ".sst", ".vlog"}
	for _, suffix := range steps {
		if err = fault(suffix); err != nil {
			return "", nil, err
		}
		names, lerr := filesWithSuffix(dir, suffix)
		if lerr != nil {
			return "", nil, lerr
		}
		for _, n := range names {
			src, dst := filepath.Join(dir, n), filepath.Join(snap, n)
			if fi, serr := os.Stat(src); serr == nil && fi.Size() == 0 && suffix != "MANIFEST" && suffix != "KEYREGISTRY" {
				continue // an empty log (see removeEmptyLogs): it holds nothing
			}
			cerr := copyFile(src, dst)
			if errors.Is(cerr, os.ErrNotExist) && suffix == ".mem" {
				continue // flushed meanwhile: its data is in a table
			}
			if cerr != nil {
				return "", nil, fmt.Errorf("snapshot %s: %w", n, cerr)
			}
		}
	}
	if err = fault("verify"); err != nil {
		return "", nil, err
	}
	vlogsAfter, err := filesWithSuffix(dir, ".vlog")
	if err != nil {
		return "", nil, err
	}
	for _, v := range vlogsBefore {
		if !slices.Contains(vlogsAfter, v) {
			return "", nil, fmt.Errorf("snapshot: value log %s was collected while copying", v)
		}
	}
	return snap, lock, nil
}

// removeSnapshot removes a snapshot directory and releases its lock.
func removeSnapshot(snap string, lock *os.File) {
	_ = os.RemoveAll(snap)
	if lock != nil {
		_ = lock.Close()
	}
}

func filesWithSuffix(dir, suffix string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), suffix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// errShrank is a file truncated (deleted, for Badger) while it was
// copied: the copy is not the file, so the snapshot is retried.
var errShrank = errors.New("the file was truncated while it was copied")

// copyFile copies src to dst, keeping holes: Badger's logs are large
// sparse files that are mostly holes. It fails with errShrank when src
// changed size meanwhile.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := copySparse(out, in, fi.Size()); err != nil {
		out.Close()
		return err
	}
	if after, err := in.Stat(); err != nil || after.Size() < fi.Size() {
		out.Close()
		return errShrank
	}
	if err := out.Truncate(fi.Size()); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copyRange copies [off, end) of in to the same offsets of out, skipping
// blocks of zeros.
func copyRange(out, in *os.File, off, end int64, buf []byte) error {
	for off < end {
		n := min(int64(len(buf)), end-off)
		m, err := in.ReadAt(buf[:n], off)
		if m > 0 && !allZero(buf[:m]) {
			if _, werr := out.WriteAt(buf[:m], off); werr != nil {
				return werr
			}
		}
		off += int64(m)
		if err == io.EOF {
			return nil // the file shrank (truncated): keep what was there
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// unclean reports whether the last writer of dir did not close it: it left
// memtable logs (Badger removes them at a clean Close; they are also there
// while a writer runs) or an empty value log (see removeEmptyLogs).
func unclean(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".mem") {
			return true
		}
		if fi, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".vlog") && fi.Size() == 0 {
			return true
		}
	}
	return false
}

// removeStaleSnapshots removes the snapshot copies of readers that are
// gone (crashed, or killed): those whose lock file no process holds. A
// directory without its lock file is one being created, unless it is more
// than a minute old.
func removeStaleSnapshots(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), snapshotPrefix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if snapshotInUse(p) {
			continue
		}
		if fi, err := e.Info(); err == nil {
			if _, err := os.Stat(filepath.Join(p, snapshotLock)); err != nil && time.Since(fi.ModTime()) < time.Minute {
				continue // being made: its lock comes next
			}
		}
		_ = os.RemoveAll(p)
	}
}
