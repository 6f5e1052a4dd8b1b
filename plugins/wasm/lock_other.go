//go:build !unix

package wasm

import "os"

// Without flock, concurrent processes may compile the same module twice;
// wazero's cache writes are atomic renames, so the result is still sound.
func lockFile(*os.File) error { return nil }

func unlockFile(*os.File) {}
