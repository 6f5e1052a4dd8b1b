package badger

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Corruption contained. A read-write Badger open reads the newest value
// log to find where its writes end and truncates the file there: it stops
// at the first entry whose checksum fails, so one damaged byte in the
// middle of the file silently cuts off every value after it. Before a
// read-write Open, guardNewestLog reads that file itself. A bad entry
// followed by a good one is damage, not a torn tail (commits are synced:
// a crash only ever tears the last write). Then the file is copied to
// quarantine/ (the copy is kept, and the log names it), and an empty value
// log is added after it, so that Badger's truncation applies to the empty
// file and the damaged one stays whole: every value in it but the bad one
// still reads, and the bad one makes only its message unreadable (Load
// gives a placeholder; see damage.go).
//
// The layout read here is Badger v4's (value.go, structs.go): a 20-byte
// header (8-byte key id, 0 without encryption, and a 12-byte IV), then
// entries: meta, user meta, uvarint key length, uvarint value length,
// uvarint expiry, key (ending in its 8-byte version), value, and a
// big-endian CRC-32C of everything before it.
const (
	vlogHeaderSize = 20
	quarantineDir  = "quarantine"
)

// vlogDamage is the damage guardNewestLog found in a value log.
type vlogDamage struct {
	file   string
	offset int64  // of the first bad entry
	next   int64  // of the first good entry after it
	key    []byte // the bad entry's key, when its header and key look whole
}

// guardNewestLog checks the newest value log of dir before a read-write
// open (see above). It does nothing when another process holds the store
// (Open then fails with ErrLocked) or when the store is encrypted.
func guardNewestLog(dir string, log hclog.Logger) error {
	if probeLock(dir) != heldByNobody {
		return nil
	}
	name, fid, ok := newestVlog(dir)
	if !ok {
		return nil
	}
	path := filepath.Join(dir, name)
	d, err := scanVlog(path)
	if err != nil || d == nil {
		return err
	}
	kept, err := quarantine(dir, path)
	if err != nil {
		return fmt.Errorf("open session store %s: value log %s is damaged at byte %d, and keeping a copy of it failed: %w", dir, name, d.offset, err)
	}
	// An empty newest log: Badger truncates that one, not the damaged one.
	stub := filepath.Join(dir, fmt.Sprintf("%06d.vlog", fid+1))
	if err := writeEmptyVlog(stub); err != nil {
		return fmt.Errorf("open session store %s: value log %s is damaged at byte %d (a copy is kept in %s), and protecting it from truncation failed: %w", dir, name, d.offset, kept, err)
	}
	what := "a value whose key is unreadable"
	if id, seq, ok := msgOfVlogKey(d.key); ok {
		what = fmt.Sprintf("session %s message %d", id, seq)
		if err := recordDamagePending(dir, id, seq, fmt.Sprintf("value log %s byte %d", name, d.offset)); err != nil {
			log.Warn("cannot record the damage", "error", err)
		}
	}
	log.Warn(fmt.Sprintf("value log %s is damaged at byte %d (%s); kept a copy in %s and left the file whole; run `kernel sessions fsck` to see every damaged message",
		name, d.offset, what, kept), "dir", dir)
	return nil
}

// newestVlog returns the value log with the highest file id.
func newestVlog(dir string) (string, uint32, bool) {
	names, err := filesWithSuffix(dir, ".vlog")
	if err != nil {
		return "", 0, false
	}
	var best string
	var bestID uint64
	found := false
	for _, n := range names {
		id, err := strconv.ParseUint(strings.TrimSuffix(n, ".vlog"), 10, 32)
		if err != nil {
			continue
		}
		if !found || id > bestID {
			best, bestID, found = n, id, true
		}
	}
	return best, uint32(bestID), found
}

// scanVlog reads a value log and returns the damage in it, or nil for a
// file that is whole up to its end (or up to a torn last write).
func scanVlog(path string) (*vlogDamage, error) {
	b, err := readData(path)
	if err != nil {
		return nil, err
	}
	if len(b) < vlogHeaderSize || binary.BigEndian.Uint64(b[:8]) != 0 {
		return nil, nil // too short to hold anything, or encrypted
	}
	off := int64(vlogHeaderSize)
	for {
		n, ok := vlogEntryAt(b, off)
		if !ok {
			break
		}
		off += n
	}
	if off >= int64(len(b)) || allZero(b[off:min(int64(len(b)), off+64)]) && allZero(b[off:]) {
		return nil, nil // the end, or the zeros of a preallocated file
	}
	// Something that is not an entry: damage if a good entry follows.
	for next := off + 1; next < int64(len(b))-maxEntryOverhead; next++ {
		if b[next] == 0 && b[next+1] == 0 && allZero(b[next:min(int64(len(b)), next+64)]) {
			if allZero(b[next:]) {
				break
			}
		}
		// The key first: cheap, and rare in other bytes; then the checksum.
		if !plausibleKey(b, next) {
			continue
		}
		if _, ok := vlogEntryAt(b, next); ok {
			d := &vlogDamage{file: path, offset: off, next: next}
			d.key = badEntryKey(b, off, next)
			return d, nil
		}
	}
	return nil, nil // a torn last write: Badger's truncation is right
}

// maxEntryOverhead is the smallest entry: header, 8-byte version, CRC.
const maxEntryOverhead = 2 + 3 + 8 + 4

// vlogEntryAt returns the length of the whole entry at off, if it is one.
func vlogEntryAt(b []byte, off int64) (int64, bool) {
	if off+2 >= int64(len(b)) {
		return 0, false
	}
	p := off + 2
	var lens [3]uint64
	for i := range lens {
		v, n := binary.Uvarint(b[p:min(int64(len(b)), p+binary.MaxVarintLen64)])
		if n <= 0 {
			return 0, false
		}
		lens[i] = v
		p += int64(n)
	}
	klen, vlen := lens[0], lens[1]
	if klen == 0 || klen > 1<<16 || vlen > uint64(len(b)) {
		return 0, false
	}
	end := p + int64(klen) + int64(vlen)
	if end+crc32.Size > int64(len(b)) {
		return 0, false
	}
	if crc32.Checksum(b[off:end], castagnoli) != binary.BigEndian.Uint32(b[end:end+crc32.Size]) {
		return 0, false
	}
	return end + crc32.Size - off, true
}

// plausibleKey reports whether the entry at off (already checked) has one
// of this store's keys or Badger's transaction marker.
func plausibleKey(b []byte, off int64) bool {
	k := entryKey(b, off)
	return bytes.HasPrefix(k, []byte(keyPrefix)) || bytes.HasPrefix(k, []byte("!badger!"))
}

// entryKey returns the key of the entry whose header starts at off,
// without checking the entry's checksum.
func entryKey(b []byte, off int64) []byte {
	p := off + 2
	var klen uint64
	for i := range 3 {
		if p >= int64(len(b)) {
			return nil
		}
		v, n := binary.Uvarint(b[p:min(int64(len(b)), p+binary.MaxVarintLen64)])
		if n <= 0 {
			return nil
		}
		if i == 0 {
			klen = v
		}
		p += int64(n)
	}
	if klen > 1<<16 || p+int64(klen) > int64(len(b)) {
		return nil
	}
	return b[p : p+int64(klen)]
}

// badEntryKey returns the key of the damaged entry at off if it looks
// whole: one of this store's message keys, ending within the entry.
func badEntryKey(b []byte, off, next int64) []byte {
	k := entryKey(b, off)
	if k == nil || off+int64(len(k)) > next || !bytes.HasPrefix(k, []byte(keyPrefix)) {
		return nil
	}
	return slices.Clone(k)
}

// msgOfVlogKey returns the session and message of a value-log key (a
// message key with Badger's 8-byte version appended).
func msgOfVlogKey(k []byte) (string, uint64, bool) {
	if len(k) < 8 {
		return "", 0, false
	}
	k = k[:len(k)-8]
	id, ok := idOf(k)
	if !ok {
		return "", 0, false
	}
	seq, ok := parseMsgSeq(k, msgPrefix(id))
	return id, seq, ok
}

// quarantine copies path into dir's quarantine directory and returns the
// copy's path.
func quarantine(dir, path string) (string, error) {
	q := filepath.Join(dir, quarantineDir)
	if err := os.MkdirAll(q, 0o700); err != nil {
		return "", err
	}
	dst := filepath.Join(q, filepath.Base(path)+"."+time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err := copyFile(path, dst); err != nil {
		_ = os.Remove(dst)
		return "", err
	}
	return dst, syncFile(dst)
}

// writeEmptyVlog writes a value log holding only its header, the way
// Badger's logFile.bootstrap does without encryption: key id 0 and a
// random IV.
func writeEmptyVlog(path string) error {
	var hdr [vlogHeaderSize]byte
	if _, err := io.ReadFull(rand.Reader, hdr[8:]); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(hdr[:]); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}
