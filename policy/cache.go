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
	"time"

	"github.com/expr-lang/expr/ast"

	"github.com/agentkernel/agentkernel/internal/cachemac"
	"github.com/agentkernel/agentkernel/internal/privfile"
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
//	<Dir>/            0700, owned by this user (else the cache is not used)
//	  v3/             0700: this format (cacheFormat)
//	    cache.key     0600: the MAC key (cachemac)
//	    <key>.json    0600: the verdict, with the SHA-256 of the snapshot
//	    <key>.snap    0600: the snapshot
//
// Each entry is sealed with an HMAC-SHA256 over its bytes and its name
// (cachemac.Seal), made with the key only this user can read: an entry
// written without the key (forged, edited, truncated, another user's or
// machine's, or another file's moved here) is a miss, and the file's tests
// run. Mode and owner are privfile's: a directory or entry another user
// owns or could write is not used; one others could only read is
// narrowed, and the note says so.

// TestCache is where Load remembers the files that passed their tests.
// The zero value is not usable: Dir is required.
type TestCache struct {
	// Dir is the cache directory, created 0700. A directory that group or
	// others may write, or that another user owns, is not used: whoever
	// can write an entry can make a policy load without its tests (and
	// without the key, nobody but this user can write one that verifies).
	Dir string
	// Build identifies the code that runs the tests; empty means the
	// running executable's (BuildID). Tests set it to simulate another
	// kernel.
	Build string
}

// cacheVersion changes when the entry format or the key's make-up does;
// cacheFormat is the directory of this format under Dir, so that kernels
// of other formats sharing Dir never read or replace these entries.
const (
	cacheVersion = 3
	cacheFormat  = "v3"
)

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
func (c *TestCache) cacheKey(fileSHA string, tools []kernel.ToolSpec) (key string, ok bool) {
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

// open makes the cache's directories private (privfile.Dir) and returns
// the format's directory and its MAC key. warn hears of repairs.
func (c *TestCache) open(warn privfile.Warn) (*cachemac.Key, error) {
	if err := privfile.Dir(c.Dir, "the policy test cache", warn); err != nil {
		return nil, err
	}
	if err := privfile.Dir(c.dir(), "the policy test cache", warn); err != nil {
		return nil, err
	}
	return cachemac.Open(c.dir(), "policy", warn)
}

// notes collects what privfile and cachemac repaired, for CacheNote.
type notes []string

func (n *notes) warn(msg string) { *n = append(*n, msg) }

func (n notes) join(more string) string { return join(append(slices.Clone(n), more)...) }

// join joins the notes that are not empty, each once.
func join(notes ...string) string {
	var out []string
	for _, s := range notes {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, "; ")
}

// lookup reports whether the cache holds a passing verdict for key and a
// file of tests tests. note says why an entry that exists was not
// trusted.
func (c *TestCache) lookup(key string, tests int) (hit bool, note string) {
	e, repaired, note := c.entry(key)
	if e == nil {
		return false, join(repaired, note)
	}
	if e.Tests != tests {
		return false, join(repaired, fmt.Sprintf("test cache entry %s ignored: damaged or not this file's", c.path(key, entrySuffix)))
	}
	return true, repaired
}

// The names of a key's files in the cache directory.
const (
	entrySuffix    = ".json"
	snapshotSuffix = ".snap"
)

func (c *TestCache) path(key, suffix string) string { return filepath.Join(c.dir(), key+suffix) }

// dir is the directory of this format's entries.
func (c *TestCache) dir() string { return filepath.Join(c.Dir, cacheFormat) }

// entry reads the passing verdict recorded for key. It is nil when there
// is none, or none to trust (note then says why). repaired says what was
// repaired on the way (a mode narrowed, a key replaced), whatever the
// outcome: it happens once, so whoever calls first reports it.
func (c *TestCache) entry(key string) (e *cacheEntry, repaired, note string) {
	var n notes
	mac, err := c.open(n.warn)
	if err != nil {
		return nil, n.join(""), "test cache not used: " + err.Error()
	}
	path := c.path(key, entrySuffix)
	b, note := readSealed(mac, path, 4<<10, n.warn)
	if b == nil {
		return nil, n.join(""), note
	}
	e = &cacheEntry{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(e); err != nil || e.Version != cacheVersion || e.Key != key || !e.Passed {
		return nil, n.join(""), fmt.Sprintf("test cache entry %s ignored: damaged or not this file's", path)
	}
	return e, n.join(""), ""
}

// readSealed reads a cache file of at most limit bytes with privfile's
// checks (this user's regular file nobody else could write, never through
// a link) and returns its payload if its MAC verifies under its name. It
// returns nil when the file is missing (note empty) or not to be trusted
// (note says why).
func readSealed(mac *cachemac.Key, path string, limit int64, warn privfile.Warn) (b []byte, note string) {
	b, err := privfile.ReadFile(path, limit+cachemac.Size+16, warn)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ""
	}
	if err != nil {
		return nil, fmt.Sprintf("test cache entry %s ignored: %v", path, err)
	}
	payload, err := mac.Unseal(b, filepath.Base(path))
	if err != nil {
		return nil, fmt.Sprintf("test cache entry %s ignored: %v", path, err)
	}
	return payload, ""
}

// loadSnapshot builds the policy of src from the snapshot its passing
// verdict names, when there is one to trust. note says why a snapshot
// that exists was not used (a verdict that cannot be trusted is left to
// lookup to report: the full load that follows reads it again).
func (c *TestCache) loadSnapshot(key, name string, src []byte, sha string, opts Options) (p *Policy, note string) {
	e, repaired, _ := c.entry(key)
	if e == nil || e.Snapshot == "" {
		return nil, repaired // lookup reports why the verdict was not used
	}
	mac, err := c.open(nil) // entry opened it, and said what it repaired
	if err != nil {
		return nil, ""
	}
	path := c.path(key, snapshotSuffix)
	var n notes
	b, note := readSealed(mac, path, maxSnapshotSize, n.warn)
	if b == nil {
		return nil, join(repaired, n.join(note))
	}
	if sha256Hex(b) != e.Snapshot {
		return nil, join(repaired, n.join(""), fmt.Sprintf("test cache snapshot %s ignored: its SHA-256 is not the one its verdict records (damaged or replaced); the file was loaded in full", path))
	}
	p, err = policyFromSnapshot(name, src, sha, opts, key, b)
	if err != nil {
		return nil, join(repaired, n.join(""), fmt.Sprintf("test cache snapshot %s ignored: %v; the file was loaded in full", path, err))
	}
	p.verdict.CacheNote = join(repaired, n.join(""))
	return p, ""
}

// store records that the policy passed its tests under key, with its
// snapshot. It returns why it could not, if it could not (the cache is
// only an optimisation).
func (c *TestCache) store(key string, p *Policy) (note string) {
	mac, err := c.open(nil)
	if err != nil {
		return "test cache not used: " + err.Error()
	}
	tests := p.testsDoc.count()
	e := cacheEntry{Version: cacheVersion, Key: key, Passed: true, Tests: tests, Policy: p.name, Revision: p.revision, SHA256: p.sha}
	// The snapshot first: the verdict, written last, names it by its
	// hash, so a reader never pairs a verdict with another snapshot.
	snap, err := p.encodeSnapshot(key, tests)
	if err == nil {
		err = c.write(mac, key+snapshotSuffix, snap)
	}
	if err == nil {
		e.Snapshot = sha256Hex(snap)
	} else {
		note = "test cache snapshot not written: " + err.Error()
	}
	b, err := json.Marshal(e)
	if err == nil {
		err = c.write(mac, key+entrySuffix, b)
	}
	if err != nil {
		return "test cache not written: " + err.Error()
	}
	c.prune()
	return note
}

// write replaces the file name of the cache directory with b, sealed with
// its MAC: a new 0600 file, renamed over whatever is at the name (a
// symlink included), never writing through it.
func (c *TestCache) write(mac *cachemac.Key, name string, b []byte) error {
	return privfile.WriteFile(filepath.Join(c.dir(), name), mac.Seal(b, name), false)
}

// prune deletes entries older than maxEntryAge and temporary files a
// crashed writer left behind.
func (c *TestCache) prune() {
	des, err := os.ReadDir(c.dir())
	if err != nil {
		return
	}
	now := time.Now()
	for _, de := range des {
		name := de.Name()
		maxAge := maxEntryAge
		switch {
		case strings.HasPrefix(name, "."):
			maxAge = time.Hour
		case !entryName.MatchString(name):
			continue
		}
		if info, err := de.Info(); err == nil && info.Mode().IsRegular() && now.Sub(info.ModTime()) > maxAge {
			os.Remove(filepath.Join(c.dir(), name))
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
