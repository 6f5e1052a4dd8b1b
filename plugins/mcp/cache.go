package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentkernel/agentkernel/internal/cachemac"
	"github.com/agentkernel/agentkernel/internal/privfile"
)

// The tool-list cache makes stdio servers start lazily: with the tools a
// server listed last time (for the same command, environment names,
// directory or URL), Load registers them without starting anything, and
// the server starts at its first call. Once connected, the kernel lists
// its tools again; when they differ from the cache, the registry follows,
// as for tools/list_changed.
//
// What the cache says is offered to the model (names, descriptions,
// schemas) until the server connects, so it is a kernel file: the
// directory is private (privfile), its entries live in a directory of
// their format (cacheFormat) with the cache's MAC key, and each is sealed
// with a MAC over its bytes and its name (cachemac). An entry that does
// not verify (written without the key, edited, another server's) is a
// miss: the server is started and asked.

// cacheFormat is the directory of this format in HostConfig.CacheDir.
const cacheFormat = "v2"

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
	return filepath.Join(h.cfg.CacheDir, cacheFormat, cfg.Name+"-"+cacheKey(cfg)[:24]+".json")
}

// cacheMAC makes the cache's directories private and returns its key.
func (h *Host) cacheMAC() (*cachemac.Key, error) {
	warn := func(msg string) { h.log.Warn(msg) }
	if err := privfile.Dir(h.cfg.CacheDir, "the MCP tool-list cache", warn); err != nil {
		return nil, err
	}
	dir := filepath.Join(h.cfg.CacheDir, cacheFormat)
	if err := privfile.Dir(dir, "the MCP tool-list cache", warn); err != nil {
		return nil, err
	}
	return cachemac.Open(dir, "mcp", warn)
}

// readCache returns the cached tool list of cfg's server, if any.
func (h *Host) readCache(cfg ServerConfig) ([]*mcp.Tool, bool) {
	p := h.cachePath(cfg)
	if p == "" {
		return nil, false
	}
	mac, err := h.cacheMAC()
	if err != nil {
		h.log.Warn("mcp tool cache not used", "error", err)
		return nil, false
	}
	b, err := privfile.ReadFile(p, 16<<20, func(msg string) { h.log.Warn(msg) })
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err == nil {
		b, err = mac.Unseal(b, filepath.Base(p))
	}
	if err != nil {
		h.log.Warn("mcp tool cache entry ignored; the server will be asked", "path", p, "error", err)
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
	mac, err := h.cacheMAC()
	if err != nil {
		h.log.Warn("mcp tool cache not written", "error", err)
		return true
	}
	sealed := mac.Seal(b, filepath.Base(p))
	if old, err := privfile.ReadFile(p, 16<<20, nil); err == nil && bytes.Equal(old, sealed) {
		return false
	}
	// A fresh temporary file (O_EXCL: never through a link put there),
	// renamed over the entry.
	if err := privfile.WriteFile(p, sealed, false); err != nil {
		h.log.Warn("mcp tool cache: could not write", "path", p, "error", err)
	}
	return true
}
