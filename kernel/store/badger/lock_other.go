//go:build !unix

package badger

import (
	"os"
	"path/filepath"
	"time"
)

type lockHolder int

const (
	heldByNobody lockHolder = iota
	heldByReaders
	heldByWriter
)

// probeLock cannot tell a held lock from other failures without flock;
// Badger's own error message says the directory is in use.
func probeLock(dir string) lockHolder { return heldByNobody }

func lockedError(dir string, h lockHolder) error { return nil }

func heldBySelf(dir string) bool { return false }

func removeEmptyLogs(dir string) ([]string, error) { return nil, nil }

func describeHolders(dir string, h lockHolder) string { return "another kernel" }

func lockSnapshot(snap string) (*os.File, error) {
	return os.OpenFile(filepath.Join(snap, snapshotLock), os.O_CREATE|os.O_RDWR, 0o600)
}

// snapshotInUse cannot tell without flock: a snapshot is stale after a day.
func snapshotInUse(snap string) bool {
	fi, err := os.Stat(snap)
	return err == nil && time.Since(fi.ModTime()) < 24*time.Hour
}

// lockDamage cannot lock without flock: within a process damageMu still
// serialises the writers of the damage record.
func lockDamage(path string) (unlock func(), err error) { return func() {}, nil }
