package wasm

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"

	"github.com/agentkernel/agentkernel/internal/cachemac"
	"github.com/agentkernel/agentkernel/internal/privfile"
)

// The compilation cache. Layout:
//
//	<CacheDir>/                              0700
//	  v2/                                    0700, this format (cacheFormat)
//	    cache.key                            0600, the MAC key (cachemac)
//	    wazero-<version>/                    0700, the wazero in go.mod
//	      <module sha256>/                   0700, one per module file
//	        .lock                            flock: one compiler at a time
//	        entries.mac                      the MAC and size of every entry
//	        wazero-<version>-<arch>-<os>/    wazero's own file cache
//	          <key>                          compiled code
//
// The cache holds machine code the kernel maps and runs in its own,
// unconfined process, so it is a kernel file twice over: no tool grant may
// reach it (cmd/kernel refuses one at start), and no entry is trusted
// unless it carries a MAC made with the cache's key, which only the
// kernel's user can read. Before wazero sees a module's directory, verify
// reads every entry (a regular file of this user, never through a link),
// computes its MAC (GMAC, cachemac.SumLarge, with the nonce entries.mac
// records) over every byte, machine code included, bound to the module's
// hash, the entry's name and its size, and deletes those whose MAC is not
// the one entries.mac lists: damaged, truncated, forged (a
// recomputed CRC is no MAC), made with another key (another machine's,
// another user's), or not listed. wazero then recompiles them, and record
// lists them again with their MACs. The key and the MACs are this format's
// own; other kernels sharing the cache (an older build keeps its
// wazero-<version>/ directory beside v2/) neither read nor disturb them.
// Why: RATIONALE.md, "Caches are kernel files, and their entries are
// authenticated".
//
// A module's directory is keyed by the wazero version and the sha256 of
// the module file; wazero keys its entries by the (instrumented) binary
// and the CPU's features. The version is in the path twice on purpose:
// wazero reads its own from the binary's build information, which test
// binaries lack (it then says "dev"), so it cannot tell two wazero
// releases apart there.

// cacheFormat is the directory of this cache format under CacheDir.
const cacheFormat = "v2"

// macFile lists every entry's MAC and size.
const macFile = "entries.mac"

var entryRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// cacheRoot is the directory of this format in cacheDir, made private.
func cacheRoot(cacheDir string, warn privfile.Warn) (string, error) {
	if err := privfile.Dir(cacheDir, "the WASM compilation cache", warn); err != nil {
		return "", err
	}
	root := filepath.Join(cacheDir, cacheFormat)
	if err := privfile.Dir(root, "the WASM compilation cache", warn); err != nil {
		return "", err
	}
	return root, nil
}

// moduleCache is one module's directory in the cache, locked against other
// processes while it is verified, compiled into and recorded.
type moduleCache struct {
	dir    string
	sha    string
	key    *cachemac.Key
	unlock func()
	log    hclog.Logger
}

// wazeroVersion is the wazero release in go.mod; a test keeps it in step.
const wazeroVersion = "v1.12.0"

// moduleCacheDir is the cache directory of the module file with this hash.
func moduleCacheDir(root, sha string) string {
	return filepath.Join(root, "wazero-"+wazeroVersion, sha)
}

func openModuleCache(root, sha string, key *cachemac.Key, log hclog.Logger) (*moduleCache, error) {
	dir := moduleCacheDir(root, sha)
	if err := privfile.Dir(dir, "the WASM compilation cache", warnTo(log)); err != nil {
		return nil, err
	}
	unlock, err := privfile.Lock(filepath.Join(dir, ".lock"))
	if err != nil {
		return nil, fmt.Errorf("lock cache directory %s: %w", dir, err)
	}
	return &moduleCache{dir: dir, sha: sha, key: key, unlock: unlock, log: log}, nil
}

// warnTo adapts a logger to privfile's warnings.
func warnTo(log hclog.Logger) privfile.Warn {
	return func(msg string) { log.Warn(msg) }
}

type macEntry struct {
	size int64
	mac  []byte
}

// entries lists the cache entries: wazero-*/<64 hex>. Temporary files of a
// concurrent writer do not match and are left alone.
func (c *moduleCache) entries() ([]string, error) {
	subs, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range subs {
		if !s.IsDir() || !strings.HasPrefix(s.Name(), "wazero-") {
			continue
		}
		files, err := os.ReadDir(filepath.Join(c.dir, s.Name()))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			// Not only regular files: a link or a FIFO planted under an
			// entry's name must be found, to be refused and removed.
			if entryRE.MatchString(f.Name()) {
				out = append(out, s.Name()+"/"+f.Name())
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// readMACs reads entries.mac; a missing or unreadable file lists nothing
// (every entry is then unverified).
func (c *moduleCache) readMACs() map[string]macEntry {
	macs := map[string]macEntry{}
	b, err := privfile.ReadFile(filepath.Join(c.dir, macFile), 1<<20, warnTo(c.log))
	if err != nil {
		return macs
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			continue
		}
		mac, err1 := hex.DecodeString(fields[0])
		size, err2 := strconv.ParseInt(fields[1], 10, 64)
		if err1 != nil || err2 != nil || len(mac) != cachemac.LargeSize {
			continue
		}
		macs[fields[2]] = macEntry{size: size, mac: mac}
	}
	return macs
}

// entryMAC reads a cache entry (a regular file of this user that nobody
// else can write, never through a link) and returns its size and MAC with
// nonce, read through a mapping where the platform has them.
func (c *moduleCache) entryMAC(name string, nonce []byte) (macEntry, error) {
	f, fi, err := privfile.Open(filepath.Join(c.dir, filepath.FromSlash(name)), warnTo(c.log))
	if err != nil {
		return macEntry{}, err
	}
	defer f.Close()
	size := fi.Size()
	data, err := mapFile(f, size)
	if err == nil {
		defer unmapMemory(data)
	} else if data, err = io.ReadAll(io.LimitReader(f, size+1)); err != nil {
		return macEntry{}, err
	} else if int64(len(data)) != size {
		return macEntry{}, fmt.Errorf("read %d bytes of %d", len(data), size)
	}
	return macEntry{size: size, mac: c.key.SumLarge(nonce, data, c.sha, name, strconv.FormatInt(size, 10))}, nil
}

// verify deletes every entry that entries.mac does not vouch for. It
// returns the entries that verified and how many it deleted.
func (c *moduleCache) verify() (map[string]macEntry, int, error) {
	names, err := c.entries()
	if err != nil {
		return nil, 0, fmt.Errorf("read cache directory %s: %w", c.dir, err)
	}
	macs := c.readMACs()
	good := map[string]macEntry{}
	removed := 0
	for _, name := range names {
		want, listed := macs[name]
		why := "not listed in " + macFile
		if listed {
			got, err := c.entryMAC(name, want.mac[:12])
			if err == nil && got.size == want.size && subtle.ConstantTimeCompare(got.mac, want.mac) == 1 {
				good[name] = got
				continue
			}
			switch {
			case err != nil:
				why = err.Error()
			case got.size != want.size:
				why = fmt.Sprintf("size %d, recorded %d", got.size, want.size)
			default:
				why = "its MAC is not the one recorded: " + cachemac.ErrForged.Error()
			}
		}
		if err := c.remove(name, why); err != nil {
			return nil, removed, err
		}
		removed++
	}
	return good, removed, nil
}

// remove deletes an entry the cache does not trust, saying why.
func (c *moduleCache) remove(name string, why any) error {
	p := filepath.Join(c.dir, filepath.FromSlash(name))
	c.log.Warn("compilation cache entry failed its check and is discarded; recompiling", "entry", p, "reason", why)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove untrusted cache entry: %w", err)
	}
	return nil
}

// dropAll deletes every entry of the module, after wazero failed with
// why on one of them, and forgets them in known. It returns how many it
// deleted.
func (c *moduleCache) dropAll(known map[string]macEntry, why error) (int, error) {
	names, err := c.entries()
	if err != nil {
		return 0, err
	}
	for _, name := range names {
		if err := c.remove(name, why); err != nil {
			return 0, err
		}
		delete(known, name)
	}
	return len(names), nil
}

// record rewrites entries.mac from the entries now present; known holds
// the MACs verify already computed, and an entry not in it is one wazero
// has just written. Nothing is written when no entry is new and none was
// deleted.
func (c *moduleCache) record(known map[string]macEntry, removed int) error {
	names, err := c.entries()
	if err != nil {
		return fmt.Errorf("read cache directory %s: %w", c.dir, err)
	}
	var b strings.Builder
	fresh := removed > 0
	for _, name := range names {
		e, ok := known[name]
		if !ok {
			fresh = true
			if e, err = c.entryMAC(name, cachemac.NewNonce()); err != nil {
				return fmt.Errorf("authenticate cache entry: %w", err)
			}
		}
		fmt.Fprintf(&b, "%x %d %s\n", e.mac, e.size, name)
	}
	if !fresh && len(names) == len(known) {
		return nil
	}
	if err := privfile.WriteFile(filepath.Join(c.dir, macFile), []byte(b.String()), false); err != nil {
		return fmt.Errorf("write %s: %w", macFile, err)
	}
	return nil
}

// sharedCache is the wazero compilation cache of one module file, shared by
// every Load of that file in a Host: the first Load verifies the directory
// and reads the compiled code; later ones (other grants, another memory
// cap) reuse the code wazero holds in memory.
type sharedCache struct {
	cache wazero.CompilationCache

	mu       sync.Mutex
	verified bool
}

// verifyOnce verifies the module's cache directory the first time it is
// called (mc must be locked) and reports whether it did.
func (c *sharedCache) verifyOnce(mc *moduleCache) (known map[string]macEntry, removed int, first bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.verified {
		return nil, 0, false, nil
	}
	known, removed, err = mc.verify()
	if err != nil {
		return nil, 0, false, err
	}
	c.verified = true
	return known, removed, true, nil
}
