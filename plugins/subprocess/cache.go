package subprocess

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentkernel/agentkernel/sandbox/proc"
)

// The Describe cache lets the kernel list and register a lazy plugin's
// tools without starting it. An entry is keyed by everything that may
// change what a plugin describes: the binary's sha256 (an interpreted
// plugin's lock's), its interpreter, arguments, working directory and
// allowed environment. A stale or tampered entry
// cannot widen what a plugin does: when the plugin starts, the host
// compares its live answer with the registered tools and refuses calls to
// any tool that differs (and rewrites the entry).

const cacheVersion = 1

type cacheEntry struct {
	Version    int        `json:"version"`
	Plugin     string     `json:"plugin"`
	SHA256     string     `json:"sha256"`
	SDKVersion string     `json:"sdk_version,omitempty"`
	Tools      []toolSpec `json:"tools"`
}

func cacheKey(cfg PluginConfig, sum string) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	key := []any{cacheVersion, sum, cfg.Args, cfg.Dir, proc.Env(cfg.Env)}
	if in := cfg.Interpreter; in != nil {
		key = append(key, in.Path, in.SHA256, in.Args)
	}
	_ = enc.Encode(key)
	return hex.EncodeToString(h.Sum(nil))
}

// cacheDir returns the cache directory, creating it 0700, or "" if the
// host has no state directory. A directory others can write to is refused:
// whoever can write the cache decides which tools the kernel offers.
func (h *Host) cacheDir() (string, error) {
	if h.cfg.StateDir == "" {
		return "", nil
	}
	dir := filepath.Join(h.cfg.StateDir, "plugins", "describe")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create plugin cache directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("plugin cache directory: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("plugin cache directory %s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("plugin cache directory %s is writable by others (mode %s); run `chmod 700 %s`", dir, fi.Mode().Perm(), dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("plugin cache directory %s belongs to uid %d, not to this process (uid %d)", dir, st.Uid, os.Geteuid())
	}
	return dir, nil
}

// readCache returns the cached tools of cfg's binary, if any. A missing,
// unreadable or invalid entry is a miss (and is logged when it is not
// simply missing).
func (h *Host) readCache(cfg PluginConfig, sum string) ([]toolSpec, bool) {
	dir, err := h.cacheDir()
	if dir == "" || err != nil {
		if err != nil {
			h.log.Warn("describe cache disabled", "error", err)
		}
		return nil, false
	}
	path := filepath.Join(dir, cacheKey(cfg, sum)+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			h.log.Warn("describe cache unreadable", "path", path, "error", err)
		}
		return nil, false
	}
	var e cacheEntry
	if err := json.Unmarshal(b, &e); err != nil || e.Version != cacheVersion || e.SHA256 != sum || len(e.Tools) == 0 {
		h.log.Warn("describe cache entry invalid; describing again", "path", path)
		return nil, false
	}
	for _, t := range e.Tools {
		if err := t.check(cfg.Name); err != nil {
			h.log.Warn("describe cache entry invalid; describing again", "path", path, "error", err)
			return nil, false
		}
	}
	return e.Tools, true
}

// writeCache records cfg's tools. Failures are logged: the cache is only an
// optimisation.
func (h *Host) writeCache(cfg PluginConfig, sum string, tools []toolSpec, sdkVersion string) {
	dir, err := h.cacheDir()
	if dir == "" || err != nil {
		if err != nil {
			h.log.Warn("describe cache disabled", "error", err)
		}
		return
	}
	b, err := json.Marshal(cacheEntry{Version: cacheVersion, Plugin: cfg.Name, SHA256: sum, SDKVersion: sdkVersion, Tools: tools})
	if err != nil {
		h.log.Warn("describe cache write failed", "error", err)
		return
	}
	path := filepath.Join(dir, cacheKey(cfg, sum)+".json")
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		h.log.Warn("describe cache write failed", "error", err)
		return
	}
	_, werr := tmp.Write(b)
	err = errors.Join(werr, tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		h.log.Warn("describe cache write failed", "path", path, "error", err)
	}
}
