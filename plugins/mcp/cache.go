package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tool-list cache makes stdio servers start lazily: with the tools a
// server listed last time (for the same command, environment names,
// directory or URL), Load registers them without starting anything, and
// the server starts at its first call. Once connected, the kernel lists
// its tools again; when they differ from the cache, the registry follows,
// as for tools/list_changed.

// cacheKey names a server's cache entry: everything that decides what the
// server is.
func cacheKey(cfg ServerConfig) string {
	b, _ := json.Marshal(struct {
		Name, Dir, URL string
		Command, Env   []string
	}{cfg.Name, cfg.Dir, cfg.URL, cfg.Command, cfg.Env})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (h *Host) cachePath(cfg ServerConfig) string {
	if h.cfg.CacheDir == "" {
		return ""
	}
	return filepath.Join(h.cfg.CacheDir, cfg.Name+"-"+cacheKey(cfg)[:24]+".json")
}

// readCache returns the cached tool list of cfg's server, if any.
func (h *Host) readCache(cfg ServerConfig) ([]*mcp.Tool, bool) {
	p := h.cachePath(cfg)
	if p == "" {
		return nil, false
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, false
	}
	var tools []*mcp.Tool
	if json.Unmarshal(b, &tools) != nil || len(tools) == 0 {
		return nil, false
	}
	return tools, true
}

// writeCache stores the server's tool list and reports whether it changed.
func (h *Host) writeCache(cfg ServerConfig, tools []*mcp.Tool) (changed bool) {
	b, err := json.Marshal(tools)
	p := h.cachePath(cfg)
	if err != nil || p == "" {
		return true
	}
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, b) {
		return false
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		h.log.Warn("mcp tool cache", "error", err)
		return true
	}
	// A fresh temporary file (O_EXCL: never through a link put there),
	// renamed over the entry.
	if err := writeFileAtomic(p, b); err != nil {
		h.log.Warn("mcp tool cache: could not write", "path", p, "error", err)
	}
	return true
}

// writeFileAtomic writes b to a new temporary file beside p (0600, created
// exclusively, so never through a link) and renames it over p.
func writeFileAtomic(p string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(p), filepath.Base(p)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
