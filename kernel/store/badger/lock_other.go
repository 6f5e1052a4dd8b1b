//go:build !unix

package badger

// lockedError cannot tell a held lock from other failures without flock;
// Badger's own error message says the directory is in use.
func lockedError(dir string, readOnly bool) error { return nil }
