package subprocess

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentkernel/agentkernel/internal/config"
)

// LockFile is the name of an interpreted plugin's lock: the file, in the
// directory of the plugin's script, that lists the sha256 of every file
// of that directory the plugin may load, one line per file in the format
// of sha256sum ("<64 hex digits>  <path>", paths relative to the
// directory, '/'-separated, sorted), so that `sha256sum -c` checks it by
// hand. The plugin's pin (PluginConfig.SHA256) is the lock's own sha256.
// WriteLock makes it; `kernel plugins lock DIR` runs WriteLock.
//
// Why a lock and not a bundle: RATIONALE.md, "Interpreted plugins: a
// lock of the plugin's directory".
const LockFile = "agentkernel.lock"

// Bounds of a lock: what WriteLock writes and the host reads.
const (
	maxLockFiles = 100_000
	maxLockBytes = 16 << 20
)

// lockSkipDirs are directories WriteLock leaves out: version control and
// Python's byte-code caches (which the interpreter writes next to the
// sources, and which it cannot write in the host's read-only copy).
var lockSkipDirs = map[string]bool{".git": true, ".hg": true, ".svn": true, "__pycache__": true}

// lockSkipFile reports whether WriteLock leaves the file name out.
func lockSkipFile(name string) bool {
	return name == LockFile || strings.HasSuffix(name, ".pyc") || strings.HasPrefix(name, "."+LockFile+"-")
}

// lockEntry is one line of a lock.
type lockEntry struct {
	sum  string
	path string // relative, '/'-separated, clean
}

// WriteLock locks the plugin directory dir: it hashes every regular file
// under it (following symbolic links, so a linked library is locked as
// the bytes it points to; leaving out .git, __pycache__, *.pyc and the
// lock itself), writes dir/agentkernel.lock (0600, replacing the old one
// without following a link) and returns the lock's sha256, which is what
// kernel.yaml pins, and the number of files locked.
func WriteLock(dir string) (sum string, files int, err error) {
	data, files, err := lockData(dir)
	if err != nil {
		return "", 0, err
	}
	tmp, err := os.CreateTemp(dir, "."+LockFile+"-*")
	if err != nil {
		return "", 0, fmt.Errorf("lock %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return "", 0, fmt.Errorf("lock %s: write %s: %w", dir, LockFile, err)
	}
	if err := tmp.Close(); err != nil {
		return "", 0, fmt.Errorf("lock %s: write %s: %w", dir, LockFile, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, LockFile)); err != nil {
		return "", 0, fmt.Errorf("lock %s: %w", dir, err)
	}
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:]), files, nil
}

// LockSHA256 is the sha256 the lock of dir would have if WriteLock wrote
// it now; it writes nothing. A lock is current when its own sha256 is
// this.
func LockSHA256(dir string) (string, error) {
	data, _, err := lockData(dir)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:]), nil
}

// lockData is the lock of dir and the number of files it lists.
func lockData(dir string) ([]byte, int, error) {
	entries, err := scanLockDir(dir)
	if err != nil {
		return nil, 0, err
	}
	var buf bytes.Buffer
	for _, e := range entries {
		fmt.Fprintf(&buf, "%s  %s\n", e.sum, e.path)
	}
	if buf.Len() > maxLockBytes {
		return nil, 0, fmt.Errorf("lock %s: the lock would be %d bytes, more than %d: lock a smaller directory (bundle the plugin?)", dir, buf.Len(), maxLockBytes)
	}
	return buf.Bytes(), len(entries), nil
}

// scanLockDir hashes the files WriteLock locks, sorted by path.
func scanLockDir(dir string) ([]lockEntry, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("lock %s: not a directory (lock the directory of the plugin's script)", dir)
	}
	var out []lockEntry
	// onPath holds the real directories on the way down, to stop at a
	// link back up the tree.
	var walk func(real, rel string, onPath []string) error
	walk = func(real, rel string, onPath []string) error {
		ents, err := os.ReadDir(real)
		if err != nil {
			return fmt.Errorf("lock %s: %w", dir, err)
		}
		for _, ent := range ents {
			name := ent.Name()
			p := path.Join(rel, name)
			if err := checkLockPath(p); err != nil {
				return fmt.Errorf("lock %s: %w", dir, err)
			}
			full := filepath.Join(real, name)
			fi, err := os.Stat(full) // follows links
			if err != nil {
				return fmt.Errorf("lock %s: %s: %w", dir, p, err)
			}
			switch {
			case fi.IsDir():
				if lockSkipDirs[name] {
					continue
				}
				target, err := filepath.EvalSymlinks(full)
				if err != nil {
					return fmt.Errorf("lock %s: %s: %w", dir, p, err)
				}
				if slices.Contains(onPath, target) {
					return fmt.Errorf("lock %s: %s links back to %s: a loop", dir, p, target)
				}
				if err := walk(full, p, append(onPath, target)); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				if rel == "" && lockSkipFile(name) || strings.HasSuffix(name, ".pyc") {
					continue
				}
				sum, err := config.FileSHA256(full)
				if err != nil {
					return fmt.Errorf("lock %s: %w", dir, err)
				}
				if len(out) == maxLockFiles {
					return fmt.Errorf("lock %s: more than %d files: lock a smaller directory (bundle the plugin?)", dir, maxLockFiles)
				}
				out = append(out, lockEntry{sum: sum, path: p})
			default:
				return fmt.Errorf("lock %s: %s is not a regular file or a directory (%s)", dir, p, fi.Mode().Type())
			}
		}
		return nil
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := walk(dir, "", []string{real}); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b lockEntry) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

// checkLockPath refuses names a lock line cannot carry: sha256sum escapes
// a backslash or a newline in a name, which the host does not read.
func checkLockPath(p string) error {
	if strings.ContainsAny(p, "\\\n\r") {
		return fmt.Errorf("%q: a name with a backslash or a line break cannot be locked; rename it", p)
	}
	return nil
}

// parseLock reads a lock. Errors name the line.
func parseLock(data []byte) ([]lockEntry, error) {
	var out []lockEntry
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		sum, p, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 {
			return nil, fmt.Errorf("line %d: want \"<sha256>  <path>\", got %q", n, clip(line, 120))
		}
		if _, err := hex.DecodeString(sum); err != nil || strings.ToLower(sum) != sum {
			return nil, fmt.Errorf("line %d: %q is not 64 lower-case hex digits", n, sum)
		}
		p = strings.TrimPrefix(p, "*") // sha256sum's binary-mode marker
		if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || strings.ContainsRune(p, '\\') {
			return nil, fmt.Errorf("line %d: %q is not a clean path inside the plugin's directory", n, p)
		}
		if path.Base(p) == LockFile && !strings.Contains(p, "/") {
			return nil, fmt.Errorf("line %d: the lock cannot lock itself", n)
		}
		if seen[p] {
			return nil, fmt.Errorf("line %d: %s is listed twice", n, p)
		}
		seen[p] = true
		out = append(out, lockEntry{sum: sum, path: p})
		if len(out) > maxLockFiles {
			return nil, fmt.Errorf("more than %d files", maxLockFiles)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("it lists no file")
	}
	return out, nil
}

// copyLocked verifies an interpreted plugin and makes its private copy: it
// reads the lock of the script's directory, checks its sha256 against the
// pin, then copies every file the lock lists into a fresh directory under
// dir while hashing the bytes it copies, and keeps the copy only if every
// file has the sha256 the lock says. Files the lock does not list are not
// copied: the plugin cannot load them. The returned root is the copy and
// sum the lock's sha256. A missing or wrong pin is a *HashError carrying
// the lock's actual sum; a changed file is a *HashError naming the file.
func copyLocked(cfg PluginConfig, dir string) (root, sum string, err error) {
	pdir := filepath.Dir(cfg.Path)
	lockPath := filepath.Join(pdir, LockFile)
	data, sum, err := readHashed(lockPath, maxLockBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", pluginError(cfg.Name, "path", fmt.Errorf(
			"%s has no %s: an interpreted plugin is pinned by the lock of its script's directory; create it with `kernel plugins lock %s` and pin the sha256 it prints", pdir, LockFile, pdir))
	}
	if err != nil {
		return "", "", fmt.Errorf("plugin %q: read its lock: %w", cfg.Name, err)
	}
	if cfg.SHA256 == "" || !pinMatches(cfg.SHA256, sum) {
		return "", sum, &HashError{Plugin: cfg.Name, Path: lockPath, Expected: cfg.SHA256, Actual: sum, Subject: SubjectLock}
	}
	entries, err := parseLock(data)
	if err != nil {
		return "", sum, fmt.Errorf("plugin %q: %s: %w (make it again with `kernel plugins lock %s`)", cfg.Name, lockPath, err, pdir)
	}
	script, err := filepath.Rel(pdir, cfg.Path)
	if err != nil || !slices.ContainsFunc(entries, func(e lockEntry) bool { return e.path == filepath.ToSlash(script) }) {
		return "", sum, fmt.Errorf("plugin %q: %s does not list the script %s: lock the directory again (`kernel plugins lock %s`) and re-pin", cfg.Name, lockPath, filepath.Base(cfg.Path), pdir)
	}
	root, err = os.MkdirTemp(dir, cfg.Name+"-*")
	if err != nil {
		return "", sum, fmt.Errorf("plugin %q: create private copy: %w", cfg.Name, err)
	}
	keep := false
	defer func() {
		if !keep {
			_ = os.RemoveAll(root)
		}
	}()
	buf := make([]byte, 1<<20)
	for _, e := range entries {
		src := filepath.Join(pdir, filepath.FromSlash(e.path))
		dst := filepath.Join(root, filepath.FromSlash(e.path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return "", sum, fmt.Errorf("plugin %q: create private copy: %w", cfg.Name, err)
		}
		actual, err := copyHashed(src, dst, buf)
		if errors.Is(err, fs.ErrNotExist) {
			return "", sum, fmt.Errorf("plugin %q: refusing to run %s: %s lists %s, which is missing (lock the directory again, and re-pin, only after checking it)", cfg.Name, cfg.Path, lockPath, src)
		}
		if err != nil {
			return "", sum, fmt.Errorf("plugin %q: copy %s: %w", cfg.Name, src, err)
		}
		if actual != e.sum {
			return "", sum, &HashError{Plugin: cfg.Name, Path: src, Expected: e.sum, Actual: actual, Subject: SubjectLockedFile, Lock: lockPath}
		}
	}
	keep = true
	return root, sum, nil
}

// copyHashed copies the regular file src (following links) to the new
// file dst (0400) and returns the sha256 of the bytes it copied.
func copyHashed(src, dst string, buf []byte) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", src)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.CopyBuffer(io.MultiWriter(out, h), in, buf); err != nil {
		_ = out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// readHashed reads the regular file p (at most max bytes) and returns its
// bytes and their sha256.
func readHashed(p string, max int64) ([]byte, string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, "", err
	}
	if !fi.Mode().IsRegular() {
		return nil, "", fmt.Errorf("%s is not a regular file", p)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, "", err
	}
	if int64(len(data)) > max {
		return nil, "", fmt.Errorf("%s is larger than %d bytes", p, max)
	}
	h := sha256.Sum256(data)
	return data, hex.EncodeToString(h[:]), nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
