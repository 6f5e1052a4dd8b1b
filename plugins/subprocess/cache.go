package subprocess

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/agentkernel/agentkernel/internal/cachemac"
	"github.com/agentkernel/agentkernel/internal/privfile"
	"github.com/agentkernel/agentkernel/sandbox/proc"
)

// The Describe cache lets the kernel list and register a lazy plugin's
// tools without starting it. An entry is keyed by everything that may
// change what a plugin describes: the binary's sha256 (an interpreted
// plugin's lock's), its interpreter, arguments, working directory and
// allowed environment. A stale entry cannot widen what a plugin does:
// when the plugin starts, the host compares its live answer with the
// registered tools and refuses calls to any tool that differs (and
// rewrites the entry). Until then the entry decides what the model is
// offered (names, descriptions, schemas), so it is a kernel file: the
// directory is private (privfile), the entries live in a directory of
// their format with the cache's MAC key, and each is sealed with a MAC
// over its bytes and its name (cachemac); one that does not verify is a
// miss, and the plugin is started and asked.

const (
	cacheVersion = 2
	// cacheFormat is the directory of this format in the describe cache.
	cacheFormat = "v2"
)

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

// cacheDir returns the cache directory of this format and its MAC key,
// creating both (0700, 0600), or "" if the host has no state directory.
// A directory another user owns or others can write is refused: whoever
// can write the cache decides which tools the kernel offers.
func (h *Host) cacheDir() (string, *cachemac.Key, error) {
	if h.cfg.StateDir == "" {
		return "", nil, nil
	}
	warn := func(msg string) { h.log.Warn(msg) }
	parent := filepath.Join(h.cfg.StateDir, "plugins", "describe")
	if err := privfile.Dir(parent, "the plugin cache", warn); err != nil {
		return "", nil, err
	}
	dir := filepath.Join(parent, cacheFormat)
	if err := privfile.Dir(dir, "the plugin cache", warn); err != nil {
		return "", nil, err
	}
	mac, err := cachemac.Open(dir, "plugins", warn)
	if err != nil {
		return "", nil, err
	}
	return dir, mac, nil
}

// readCache returns the cached tools of cfg's binary, if any. A missing,
// unreadable, unauthenticated or invalid entry is a miss (and is logged
// when it is not simply missing).
func (h *Host) readCache(cfg PluginConfig, sum string) ([]toolSpec, bool) {
	dir, mac, err := h.cacheDir()
	if dir == "" || err != nil {
		if err != nil {
			h.log.Warn("describe cache disabled", "error", err)
		}
		return nil, false
	}
	name := cacheKey(cfg, sum) + ".json"
	path := filepath.Join(dir, name)
	b, err := privfile.ReadFile(path, 16<<20, func(msg string) { h.log.Warn(msg) })
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err == nil {
		b, err = mac.Unseal(b, name)
	}
	if err != nil {
		h.log.Warn("describe cache entry ignored; describing again", "path", path, "error", err)
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
	dir, mac, err := h.cacheDir()
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
	name := cacheKey(cfg, sum) + ".json"
	if err := privfile.WriteFile(filepath.Join(dir, name), mac.Seal(b, name), false); err != nil {
		h.log.Warn("describe cache write failed", "path", filepath.Join(dir, name), "error", err)
	}
}
