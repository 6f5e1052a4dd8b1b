package wasm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
)

// The compilation cache. Layout:
//
//	<CacheDir>/                            0700
//	  wazero-<version>/                    0700, the wazero in go.mod
//	    <module sha256>/                   0700, one per module file
//	      .lock                            flock: one compiler at a time
//	      entries.crc                      size and CRC-32C of every entry (entrySum)
//	      wazero-<version>-<arch>-<os>/    wazero's own file cache
//	        <key>                          compiled code
//
// A module's directory is keyed by the wazero version and the sha256 of the
// module file; wazero keys its entries by the (instrumented) binary and the
// CPU's features. The version is in the path twice on purpose: wazero reads
// its own from the binary's build information, which test binaries lack
// (it then says "dev"), so it cannot tell two wazero releases apart there.
// wazero trusts what it reads except the machine code, whose CRC it checks:
// a damaged function offset in front of the code could run garbage. Before
// wazero sees the directory, verify compares every entry's size and the
// CRC-32C of all but its machine code (see entrySum) with entries.crc and
// deletes those that differ or are not listed; wazero then recompiles
// them, and record lists them again. Damaged machine code fails wazero's
// own check; load then deletes the module's entries and compiles again.

// sumFile lists every entry's size and the CRC-32C of all but its machine
// code (entrySum). oldSumFile, written by earlier versions, has CRCs of
// whole files (checksum); it vouches for its entries until sumFile exists.
// Other versions sharing the cache keep reading and writing it.
const (
	sumFile    = "entries.crc"
	oldSumFile = "entries.sum"
)

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	entryRE    = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ensurePrivateDir creates dir (and missing parents) with mode 0700. An
// existing directory that other users can reach is refused rather than
// changed: it may not be ours alone (think of a cache_dir set to /tmp).
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create cache directory: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("create cache directory: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("cache directory %s is not a directory", dir)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("cache directory %s has mode %04o: other users could plant compiled code in it; run chmod 700 %s or choose another directory", dir, perm, dir)
	}
	// A directory another user made (say in /tmp, before us) is theirs to
	// fill, whatever its mode says now.
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("cache directory %s belongs to uid %d, not to this process (uid %d): its owner could plant compiled code in it; choose another directory", dir, sys.Uid, os.Geteuid())
	}
	return nil
}

// moduleCache is one module's directory in the cache, locked against other
// processes while it is verified, compiled into and recorded.
type moduleCache struct {
	dir  string
	lock *os.File
	log  hclog.Logger
	// oldSums: verify accepted entries listed with whole-file CRCs, so
	// record must write entries.crc.
	oldSums bool
}

// wazeroVersion is the wazero release in go.mod; a test keeps it in step.
const wazeroVersion = "v1.12.0"

// moduleCacheDir is the cache directory of the module file with this hash.
func moduleCacheDir(cacheDir, sha string) string {
	return filepath.Join(cacheDir, "wazero-"+wazeroVersion, sha)
}

func openModuleCache(cacheDir, sha string, log hclog.Logger) (*moduleCache, error) {
	dir := moduleCacheDir(cacheDir, sha)
	if err := ensurePrivateDir(dir); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open cache lock: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock cache directory %s: %w", dir, err)
	}
	return &moduleCache{dir: dir, lock: f, log: log}, nil
}

// unlock releases the directory to other processes.
func (c *moduleCache) unlock() {
	unlockFile(c.lock)
	c.lock.Close()
}

type sumEntry struct {
	size int64
	crc  uint32
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
			if f.Type().IsRegular() && entryRE.MatchString(f.Name()) {
				out = append(out, s.Name()+"/"+f.Name())
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// readSums reads one of the module's sum files; a missing or unreadable
// file lists nothing (its entries are unverified).
func (c *moduleCache) readSums(file string) map[string]sumEntry {
	sums := map[string]sumEntry{}
	f, err := os.Open(filepath.Join(c.dir, file))
	if err != nil {
		return sums
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			continue
		}
		crc, err1 := strconv.ParseUint(fields[0], 16, 32)
		size, err2 := strconv.ParseInt(fields[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		sums[fields[2]] = sumEntry{size: size, crc: uint32(crc)}
	}
	return sums
}

// openSized opens a file for reading and says how large it is.
func openSized(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// checksum is the size and CRC-32C of a whole file, read through a
// mapping when the platform has them, as oldSumFile lists them.
func checksum(path string) (sumEntry, error) {
	f, size, err := openSized(path)
	if err != nil {
		return sumEntry{}, err
	}
	defer f.Close()
	if b, err := mapFile(f, size); err == nil {
		defer unmapMemory(b)
		return sumEntry{size: int64(len(b)), crc: crc32.Checksum(b, castagnoli)}, nil
	}
	h := crc32.New(castagnoli)
	n, err := io.CopyBuffer(h, f, make([]byte, 1<<20))
	if err != nil {
		return sumEntry{}, err
	}
	return sumEntry{size: n, crc: h.Sum32()}, nil
}

// entrySum is the size of a cache entry and the CRC-32C of everything in
// it but the machine code, which wazero checks itself (with its own CRC,
// when it reads it): the header, the function offsets and the code's
// length in front of it, and the code's CRC and the source map behind it.
// Checksumming the code too would read tens of megabytes twice on every
// start. A file that does not parse as an entry is checksummed whole.
//
// The layout (wazero v1.12, internal/engine/wazevo/engine_cache.go):
// "WAZEVO", version length (1 byte), version, function count n (uint32
// LE), n function offsets (uint64 LE), code length (uint64 LE), the code,
// then the rest.
func entrySum(path string) (sumEntry, error) {
	f, size, err := openSized(path)
	if err != nil {
		return sumEntry{}, err
	}
	defer f.Close()
	whole := func() (sumEntry, error) { return checksum(path) }
	var head [6 + 1 + 255 + 4]byte
	n, _ := f.ReadAt(head[:], 0)
	if n < 7 || string(head[:6]) != "WAZEVO" {
		return whole()
	}
	hdr := 6 + 1 + int(head[6]) + 4
	if n < hdr {
		return whole()
	}
	funcs := int64(binary.LittleEndian.Uint32(head[hdr-4 : hdr]))
	prefixLen := int64(hdr) + 8*funcs + 8
	if prefixLen > size {
		return whole()
	}
	prefix := make([]byte, prefixLen)
	if _, err := f.ReadAt(prefix, 0); err != nil {
		return sumEntry{}, err
	}
	codeLen := binary.LittleEndian.Uint64(prefix[prefixLen-8:])
	if codeLen > uint64(size-prefixLen) {
		return whole()
	}
	rest := make([]byte, size-prefixLen-int64(codeLen))
	if len(rest) > 0 {
		if _, err := f.ReadAt(rest, prefixLen+int64(codeLen)); err != nil {
			return sumEntry{}, err
		}
	}
	crc := crc32.Update(crc32.Checksum(prefix, castagnoli), castagnoli, rest)
	return sumEntry{size: size, crc: crc}, nil
}

// verify deletes every entry that does not match entries.crc (or the old entries.sum). It returns
// the entries that matched and how many it deleted.
func (c *moduleCache) verify() (map[string]sumEntry, int, error) {
	names, err := c.entries()
	if err != nil {
		return nil, 0, fmt.Errorf("read cache directory %s: %w", c.dir, err)
	}
	sums, old := c.readSums(sumFile), c.readSums(oldSumFile)
	good := map[string]sumEntry{}
	removed := 0
	for _, name := range names {
		p := filepath.Join(c.dir, filepath.FromSlash(name))
		want, listed := sums[name]
		got, err := entrySum(p)
		if wantAll, ok := old[name]; err == nil && !listed && ok {
			// Listed only the old way (by an older build sharing the
			// cache): check it the old way; record then lists it in
			// sumFile too.
			var all sumEntry
			if all, err = checksum(p); err == nil && all == wantAll {
				good[name] = got
				c.oldSums = true
				continue
			}
			got, want, listed = all, wantAll, true
		}
		if err == nil && listed && got == want {
			good[name] = got
			continue
		}
		why := "not listed in " + sumFile
		switch {
		case err != nil:
			why = err.Error()
		case listed && got.size != want.size:
			why = fmt.Sprintf("size %d, recorded %d", got.size, want.size)
		case listed:
			why = fmt.Sprintf("CRC-32C %08x, recorded %08x", got.crc, want.crc)
		}
		c.log.Warn("compilation cache entry is damaged or unverified; recompiling", "entry", p, "reason", why)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, removed, fmt.Errorf("remove damaged cache entry: %w", err)
		}
		removed++
	}
	return good, removed, nil
}

// dropAll deletes every entry of the module, after wazero failed with
// why on one of them, and forgets them in known. It returns how many it
// deleted.
func (c *moduleCache) dropAll(known map[string]sumEntry, why error) (int, error) {
	names, err := c.entries()
	if err != nil {
		return 0, err
	}
	for _, name := range names {
		p := filepath.Join(c.dir, filepath.FromSlash(name))
		c.log.Warn("compilation cache entry is damaged or unverified; recompiling", "entry", p, "reason", why)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("remove damaged cache entry: %w", err)
		}
		delete(known, name)
	}
	return len(names), nil
}

// record rewrites entries.crc from the entries now present; known holds
// the sums verify already computed. Nothing is written when no entry is new
// and none was deleted.
func (c *moduleCache) record(known map[string]sumEntry, removed int) error {
	names, err := c.entries()
	if err != nil {
		return fmt.Errorf("read cache directory %s: %w", c.dir, err)
	}
	var b strings.Builder
	fresh := removed > 0 || c.oldSums
	for _, name := range names {
		s, ok := known[name]
		if !ok {
			fresh = true
			if s, err = entrySum(filepath.Join(c.dir, filepath.FromSlash(name))); err != nil {
				return fmt.Errorf("checksum cache entry: %w", err)
			}
		}
		fmt.Fprintf(&b, "%08x %d %s\n", s.crc, s.size, name)
	}
	if !fresh && len(names) == len(known) {
		return nil
	}
	if err := c.writeSums(sumFile, b.String()); err != nil {
		return err
	}
	// Keep oldSumFile listing every entry too, so that an older build
	// sharing the cache does not take ours for unverified and delete them.
	old := c.readSums(oldSumFile)
	b.Reset()
	for _, name := range names {
		s, ok := old[name]
		if _, verified := known[name]; !ok || !verified {
			if s, err = checksum(filepath.Join(c.dir, filepath.FromSlash(name))); err != nil {
				return fmt.Errorf("checksum cache entry: %w", err)
			}
		}
		fmt.Fprintf(&b, "%08x %d %s\n", s.crc, s.size, name)
	}
	return c.writeSums(oldSumFile, b.String())
}

// writeSums replaces one of the module's sum files with text, atomically.
func (c *moduleCache) writeSums(file, text string) error {
	tmp, err := os.CreateTemp(c.dir, file+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if _, err := tmp.WriteString(text); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(c.dir, file)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", file, err)
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
func (c *sharedCache) verifyOnce(mc *moduleCache) (known map[string]sumEntry, removed int, first bool, err error) {
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
