package subprocess

import (
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/agentkernel/agentkernel/internal/privfile"
)

// verifyCopy verifies what cfg pins and makes the private copy the host
// executes: the binary's copy (copyVerified), or for an interpreted plugin
// the checked interpreter and the copy of the files its lock lists
// (copyLocked). It returns the copy's path, a file or a directory, and the
// pinned sha256: the binary's or the lock's. cfg must be normalized; for an
// interpreted plugin it records the interpreter's real path in
// cfg.Interpreter (commandLine runs it).
func verifyCopy(cfg PluginConfig, dir string) (exe, sum string, err error) {
	if cfg.Interpreter == nil {
		return copyVerified(cfg, dir)
	}
	if err := checkInterpreter(cfg); err != nil {
		return "", "", err
	}
	return copyLocked(cfg, dir)
}

// pinMatches compares a normalized pin with a sum in constant time.
func pinMatches(pin, sum string) bool {
	return subtle.ConstantTimeCompare([]byte(sum), []byte(pin)) == 1
}

// copyVerified copies the plugin binary into dir, hashes the copy (as it
// is written: copyAndHash), and keeps the copy only if its sha256 is the
// pinned one. The
// host then executes the copy, never cfg.Path: the bytes that run are the
// bytes that were hashed, whatever happens to cfg.Path afterwards (this is
// the check-then-exec race go-plugin's SecureConfig leaves open). dir must
// be private to the host (0700), so nobody else can touch the copy.
//
// The returned path is the executable copy and sum the binary's sha256. A
// missing or wrong pin is a *HashError carrying the actual sum.
func copyVerified(cfg PluginConfig, dir string) (path, sum string, err error) {
	return copyVerifiedAs(cfg, dir, cfg.Name+"-*")
}

// copyVerifiedAs is copyVerified with the copy's name pattern
// (os.CreateTemp's).
func copyVerifiedAs(cfg PluginConfig, dir, pattern string) (path, sum string, err error) {
	src, err := os.Open(cfg.Path)
	if err != nil {
		return "", "", fmt.Errorf("plugin %q: open binary: %w", cfg.Name, err)
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return "", "", fmt.Errorf("plugin %q: stat binary: %w", cfg.Name, err)
	}
	if !fi.Mode().IsRegular() {
		return "", "", fmt.Errorf("plugin %q: %s is not a regular file", cfg.Name, cfg.Path)
	}
	dst, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", "", fmt.Errorf("plugin %q: create private copy: %w", cfg.Name, err)
	}
	keep := false
	defer func() {
		if !keep {
			_ = os.Remove(dst.Name())
		}
	}()
	// The hash reads the copy itself, each part once it is written and
	// while the next is copied (copyAndHash): the bytes hashed are the
	// bytes the host executes (nobody else can write the copy), and the
	// copy never passes through a user-space buffer.
	digest, err := copyAndHash(dst, src)
	if err != nil {
		_ = dst.Close()
		return "", "", fmt.Errorf("plugin %q: copy and hash binary: %w", cfg.Name, err)
	}
	if err := dst.Close(); err != nil {
		return "", "", fmt.Errorf("plugin %q: write private copy: %w", cfg.Name, err)
	}
	sum = hex.EncodeToString(digest)
	if cfg.SHA256 == "" || !pinMatches(cfg.SHA256, sum) {
		return "", sum, &HashError{Plugin: cfg.Name, Path: cfg.Path, Expected: cfg.SHA256, Actual: sum}
	}
	if err := checkNative(dst.Name()); err != nil {
		return "", sum, fmt.Errorf("plugin %q: %s: %w", cfg.Name, cfg.Path, err)
	}
	if err := os.Chmod(dst.Name(), 0o500); err != nil {
		return "", "", fmt.Errorf("plugin %q: make private copy executable: %w", cfg.Name, err)
	}
	keep = true
	return dst.Name(), sum, nil
}

// privateDir creates a fresh 0700 directory under parent (os.TempDir() if
// empty) for the host's verified copies and sockets.
func privateDir(parent string) (string, error) {
	abs, err := privfile.TempDir(parent, "agentkernel-plugins-")
	if err != nil {
		return "", fmt.Errorf("create private plugin directory: %w", err)
	}
	// go-plugin puts each socket at <dir>/plugin-dir<digits>/plugin<digits>;
	// a unix socket path has at most 107 bytes.
	if len(abs)+38 > 107 {
		_ = os.RemoveAll(abs)
		return "", fmt.Errorf("run directory %s is too long for unix socket paths (at most %d bytes); choose a shorter one", parent, 107-38-len("/agentkernel-plugins-1234567890"))
	}
	return abs, nil
}

// ErrWrapper refuses a pinned file that is a script: a wrapper would exec
// binaries nobody pinned. Pin the binary itself.
var ErrWrapper = errors.New("is a script (#!), not a binary: wrapper scripts are refused because what they run is not pinned; pin the plugin binary itself, or for a script plugin name its interpreter (interpreter: {path: /usr/bin/node}) so that the script's whole directory is pinned by its lock")

// checkNative refuses scripts: the file must not start with "#!".
func checkNative(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, 2)
	n, _ := io.ReadFull(f, head)
	if n == 2 && string(head) == "#!" {
		return ErrWrapper
	}
	return nil
}
