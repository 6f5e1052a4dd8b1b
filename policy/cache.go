package policy

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/expr-lang/expr/ast"

	"github.com/agentkernel/agentkernel/kernel"
)

// The test-verdict cache. A policy's tests gate every load, and a file
// that has not changed passes them again: the cache remembers that a file
// passed, keyed by everything that decides whether it does (cacheKey), so
// a start or a reload of the same file under the same kernel skips them.
// Beside the verdict it keeps the snapshot of what the load built
// (snapshot.go), so such a load does not parse, compile or lint the file
// either. Why, and what the key holds: RATIONALE.md, "Policy tests: a
// cached verdict, keyed by what decides it" and "Policy load from the
// test cache: a snapshot, compiled on first use".
//
// Layout:
//
//	<Dir>/          0700, owned by this user (else the cache is not used)
//	  <key>.json    0600, owned by this user (else the entry is ignored):
//	                the verdict, with the SHA-256 of the snapshot
//	  <key>.snap    0600, owned by this user (else the file is loaded in
//	                full): the snapshot

// VerdictCache is where Load remembers the files that passed their tests.
// The zero value is not usable: Dir is required.
type VerdictCache struct {
	// Dir is the cache directory, created 0700. A directory that group or
	// others may enter, or that another user owns, is not used: whoever
	// can write an entry can make a policy load without its tests.
	Dir string
	// Build identifies the code that runs the tests; empty means the
	// running executable's (BuildID). Tests set it to simulate another
	// kernel.
	Build string
}

// cacheVersion changes when the entry format or the key's make-up does.
const cacheVersion = 2

// maxEntryAge is how long an entry nobody wrote again is kept.
const maxEntryAge = 30 * 24 * time.Hour

// cacheEntry is one file of the cache.
type cacheEntry struct {
	Version int    `json:"version"`
	Key     string `json:"key"`
	Passed  bool   `json:"passed"`
	Tests   int    `json:"tests"`
	// Policy, Revision and SHA256 are for a person reading the cache.
	Policy   string `json:"policy"`
	Revision string `json:"revision"`
	SHA256   string `json:"sha256"`
	// Snapshot is the hex SHA-256 of the file's snapshot (<key>.snap, see
	// snapshot.go); empty when none was written.
	Snapshot string `json:"snapshot,omitempty"`
}

var entryName = regexp.MustCompile(`^[0-9a-f]{64}\.(json|snap)$`)

// zoneWords finds the expressions zoneDependent needs to look at (vars
// are inlined, so an expression's source may not show them: the source of
// every var is checked too).
var zoneWords = regexp.MustCompile(`date|timezone|In|Local|Zone|IsDST|Location`)

// TestVerdict says how a policy's tests were passed when it loaded.
type TestVerdict struct {
	// Cached is set when the cache vouched for the file: its tests did not
	// run.
	Cached bool
	// Tests is the number of tests in the file.
	Tests int
	// Evaluated counts the rules the tests evaluated (0 when Cached).
	Evaluated int
	// Elapsed is the time the tests took (0 when Cached).
	Elapsed time.Duration
	// CacheNote says why the cache was not used or not written, when that
	// was not simply a first load: a directory or entry with the wrong
	// owner or mode, a damaged entry, a file whose tests read the
	// machine's time zone.
	CacheNote string
}

// TestVerdict reports how the policy's tests were passed by Load (zero for
// a policy from Compile).
func (p *Policy) TestVerdict() TestVerdict { return p.verdict }

// BuildID identifies the running executable: its Go build ID (which
// changes with any change to the code, the dependencies, the Go release or
// the build flags), or, where it cannot be read, the SHA-256 of the file.
// It is "" when neither can be read; the cache is then not used.
var BuildID = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if id := goBuildID(exe); id != "" {
		return "go:" + id
	}
	f, err := os.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
})

// goBuildID reads the Go build ID note of an ELF executable: a note named
// "Go" of type 4 in section .note.go.buildid (what `go tool buildid`
// prints).
func goBuildID(exe string) string {
	f, err := elf.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := f.Section(".note.go.buildid")
	if s == nil {
		return ""
	}
	b, err := s.Data()
	if err != nil || len(b) < 16 {
		return ""
	}
	bo := f.ByteOrder
	nameSize, descSize, typ := bo.Uint32(b), bo.Uint32(b[4:]), bo.Uint32(b[8:])
	if nameSize != 4 || typ != 4 || !bytes.Equal(b[12:16], []byte("Go\x00\x00")) || uint64(len(b)) < 16+uint64(descSize) {
		return ""
	}
	return string(b[16 : 16+descSize])
}

// cacheKey is the hex SHA-256 of what decides whether a file passes its
// tests: the cache's version, the build of the code that runs them, the
// file's bytes (by their SHA-256, fileSHA), and the registered tools'
// specs (tests take tiers, tags, sources and schemas from them), sorted by
// name. A policy file includes no other file. ok is false when the build
// cannot be identified.
func (c *VerdictCache) cacheKey(fileSHA string, tools []kernel.ToolSpec) (key string, ok bool) {
	build := c.Build
	if build == "" {
		build = BuildID()
	}
	if build == "" {
		return "", false
	}
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field(fmt.Appendf(nil, "agentkernel policy test verdict v%d", cacheVersion))
	field([]byte(build))
	field([]byte(fileSHA))
	specs := slices.Clone(tools)
	slices.SortStableFunc(specs, func(a, b kernel.ToolSpec) int { return strings.Compare(a.Name, b.Name) })
	field(fmt.Appendf(nil, "%t %d", tools == nil, len(specs)))
	for _, s := range specs {
		b, err := json.Marshal(s)
		if err != nil {
			return "", false
		}
		field(b)
	}
	return hex.EncodeToString(h.Sum(nil)), true
}

// privateDir checks that dir is a directory only this user can reach,
// creating it (0700) when missing. Like the WASM compilation cache's, an
// existing directory open to others is refused, not changed.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("directory %s has mode %04o: other users could vouch for a policy's tests in it; run chmod 700 %s", dir, perm, dir)
	}
	if uid, ok := fileOwner(st); ok && uid != os.Geteuid() {
		return fmt.Errorf("directory %s belongs to uid %d, not to this process (uid %d): its owner could vouch for a policy's tests in it", dir, uid, os.Geteuid())
	}
	return nil
}

func fileOwner(st fs.FileInfo) (int, bool) {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(sys.Uid), true
	}
	return 0, false
}

// lookup reports whether the cache holds a passing verdict for key and a
// file of tests tests. note says why an entry that exists was not
// trusted.
func (c *VerdictCache) lookup(key string, tests int) (hit bool, note string) {
	e, note := c.entry(key)
	if e == nil {
		return false, note
	}
	if e.Tests != tests {
		return false, fmt.Sprintf("test cache entry %s ignored: damaged or not this file's", c.path(key, entrySuffix))
	}
	return true, ""
}

// The names of a key's files in the cache directory.
const (
	entrySuffix    = ".json"
	snapshotSuffix = ".snap"
)

func (c *VerdictCache) path(key, suffix string) string { return filepath.Join(c.Dir, key+suffix) }

// entry reads the passing verdict recorded for key. It is nil when there
// is none, or none to trust (note then says why).
func (c *VerdictCache) entry(key string) (*cacheEntry, string) {
	if err := privateDir(c.Dir); err != nil {
		return nil, "test cache not used: " + err.Error()
	}
	path := c.path(key, entrySuffix)
	b, note := readPrivate(path, 4<<10)
	if b == nil {
		return nil, note
	}
	var e cacheEntry
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Version != cacheVersion || e.Key != key || !e.Passed {
		return nil, fmt.Sprintf("test cache entry %s ignored: damaged or not this file's", path)
	}
	return &e, ""
}

// readPrivate reads a cache file of at most limit bytes that this user
// owns and only this user may read or write, never following a symlink.
// It returns nil when the file is missing (note empty) or not to be
// trusted (note says why).
func readPrivate(path string, limit int64) (b []byte, note string) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ""
	}
	if err != nil {
		return nil, fmt.Sprintf("test cache entry %s ignored: %v", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Sprintf("test cache entry %s ignored: %v", path, err)
	}
	switch uid, ok := fileOwner(st); {
	case !st.Mode().IsRegular():
		return nil, fmt.Sprintf("test cache entry %s ignored: not a regular file", path)
	case st.Mode().Perm()&0o077 != 0:
		return nil, fmt.Sprintf("test cache entry %s ignored: mode %04o, not 0600", path, st.Mode().Perm())
	case ok && uid != os.Geteuid():
		return nil, fmt.Sprintf("test cache entry %s ignored: it belongs to uid %d, not to this process (uid %d)", path, uid, os.Geteuid())
	case st.Size() > limit:
		return nil, fmt.Sprintf("test cache entry %s ignored: larger than %d bytes", path, limit)
	}
	b, err = io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, fmt.Sprintf("test cache entry %s ignored: %v", path, err)
	}
	return b, ""
}

// loadSnapshot builds the policy of src from the snapshot its passing
// verdict names, when there is one to trust. note says why a snapshot
// that exists was not used (a verdict that cannot be trusted is left to
// lookup to report: the full load that follows reads it again).
func (c *VerdictCache) loadSnapshot(key, name string, src []byte, sha string, opts Options) (p *Policy, note string) {
	e, _ := c.entry(key)
	if e == nil || e.Snapshot == "" {
		return nil, ""
	}
	path := c.path(key, snapshotSuffix)
	b, note := readPrivate(path, maxSnapshotSize)
	if b == nil {
		return nil, note
	}
	if sha256Hex(b) != e.Snapshot {
		return nil, fmt.Sprintf("test cache snapshot %s ignored: its SHA-256 is not the one its verdict records (damaged or replaced); the file was loaded in full", path)
	}
	p, err := policyFromSnapshot(name, src, sha, opts, key, b)
	if err != nil {
		return nil, fmt.Sprintf("test cache snapshot %s ignored: %v; the file was loaded in full", path, err)
	}
	return p, ""
}

// store records that the policy passed its tests under key, with its
// snapshot. It returns why it could not, if it could not (the cache is
// only an optimisation).
func (c *VerdictCache) store(key string, p *Policy) (note string) {
	if err := privateDir(c.Dir); err != nil {
		return "test cache not used: " + err.Error()
	}
	tests := p.testsDoc.count()
	e := cacheEntry{Version: cacheVersion, Key: key, Passed: true, Tests: tests, Policy: p.name, Revision: p.revision, SHA256: p.sha}
	// The snapshot first: the verdict, written last, names it by its
	// hash, so a reader never pairs a verdict with another snapshot.
	snap, err := p.encodeSnapshot(key, tests)
	if err == nil {
		err = c.write(key+snapshotSuffix, snap)
	}
	if err == nil {
		e.Snapshot = sha256Hex(snap)
	} else {
		note = "test cache snapshot not written: " + err.Error()
	}
	b, err := json.Marshal(e)
	if err == nil {
		err = c.write(key+entrySuffix, b)
	}
	if err != nil {
		return "test cache not written: " + err.Error()
	}
	c.prune()
	return note
}

// write replaces the file name of the cache directory with b: a new 0600
// file, renamed over whatever is at the name (a symlink included), never
// writing through it.
func (c *VerdictCache) write(name string, b []byte) error {
	tmp, err := os.CreateTemp(c.Dir, ".tmp-*") // 0600, a new file
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	err = errors.Join(werr, tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(c.Dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// prune deletes entries older than maxEntryAge and temporary files a
// crashed writer left behind.
func (c *VerdictCache) prune() {
	des, err := os.ReadDir(c.Dir)
	if err != nil {
		return
	}
	now := time.Now()
	for _, de := range des {
		name := de.Name()
		maxAge := maxEntryAge
		switch {
		case strings.HasPrefix(name, ".tmp-"):
			maxAge = time.Hour
		case !entryName.MatchString(name):
			continue
		}
		if info, err := de.Info(); err == nil && info.Mode().IsRegular() && now.Sub(info.ModTime()) > maxAge {
			os.Remove(filepath.Join(c.Dir, name))
		}
	}
}

// zoneDependent names what makes a file's tests depend on the machine's
// time zone data, which the cache key does not hold: the builtins date
// and timezone (date with a zone argument) and the time methods that
// convert to or describe a zone. A file that uses one is never cached.
func (p *Policy) zoneDependent() string {
	found := ""
	p.eachProgram(func(pr *program) {
		if pr == nil || found != "" || !zoneWords.MatchString(pr.src.Src) {
			return
		}
		root := pr.node()
		ast.Walk(&root, visitorFunc(func(n *ast.Node) {
			switch n := (*n).(type) {
			case *ast.BuiltinNode:
				if n.Name == "date" || n.Name == "timezone" {
					found = n.Name
				}
			case *ast.CallNode:
				if m, ok := n.Callee.(*ast.MemberNode); ok && m.Method {
					if s, ok := m.Property.(*ast.StringNode); ok {
						switch s.Value {
						case "In", "Local", "Zone", "ZoneBounds", "IsDST", "Location":
							found = s.Value
						}
					}
				}
			}
		}))
	})
	return found
}
