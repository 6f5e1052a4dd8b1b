// Package cachemac authenticates what the kernel reads back from its
// caches: compiled WASM machine code, policy verdicts and snapshots, the
// tool lists of MCP servers and plugins. An entry is trusted only when it
// carries an HMAC-SHA256 made with a key that only the kernel's user can
// read, over the entry's bytes and the name it is stored under; a forged,
// edited, truncated or moved entry, one made with another key (another
// machine's, another user's) or with none, fails the check and the cache
// treats it as missing.
//
// Each cache keeps its key in its own directory (KeyFile), created on
// first use: 32 random bytes, 0600, through privfile. Why a MAC and not a
// checksum: RATIONALE.md, "Caches are kernel files, and their entries are
// authenticated".
package cachemac

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentkernel/agentkernel/internal/privfile"
)

// KeyFile is the name of a cache's key file in its directory.
const KeyFile = "cache.key"

// Size is the length of a MAC.
const Size = sha256.Size

// keyHeader starts a key file; the key follows in hex.
const keyHeader = "agentkernel cache key v1\n"

// ErrForged is matched by the error of an entry whose MAC does not verify.
var ErrForged = errors.New("not authenticated by this cache's key (forged, damaged, or written with another key)")

// Key is one cache's MAC key. It is immutable and safe for concurrent use.
type Key struct {
	k      []byte
	domain string
}

// Open returns the key of the cache in dir, which must be a private
// directory (privfile.Dir), creating the key file on first use. domain
// names the cache and is bound into every MAC ("wasm", "policy"...), so an
// entry of one cache never verifies in another. A key file that is not a
// private file of this user, or that does not parse, is replaced by a new
// key, and warn (may be nil) says so: every entry made with the old key
// then fails and is rebuilt.
func Open(dir, domain string, warn privfile.Warn) (*Key, error) {
	p := filepath.Join(dir, KeyFile)
	for attempt := 0; ; attempt++ {
		b, err := privfile.ReadFile(p, 256, warn)
		if err == nil {
			if k, ok := parseKey(b); ok {
				return &Key{k: k, domain: domain}, nil
			}
			err = errors.New("it does not hold a key")
		}
		if !errors.Is(err, fs.ErrNotExist) {
			if attempt > 0 {
				return nil, fmt.Errorf("cache key %s: %w", p, err)
			}
			if warn != nil {
				warn(fmt.Sprintf("cache key %s is unusable (%v); made a new one, so the entries made with the old one are rebuilt", p, err))
			}
			if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				return nil, fmt.Errorf("cache key %s: %v; removing it: %w", p, err, rerr)
			}
		}
		if err := create(p); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create cache key %s: %w", p, err)
		}
		// Created, or another process was first: read what is there.
		if attempt > 2 {
			return nil, fmt.Errorf("cache key %s: could not create it", p)
		}
	}
}

// create writes a new key at p unless a file is there: written beside it
// and hard-linked into place, so two processes starting at once agree on
// one key (the loser gets fs.ErrExist and reads the winner's).
func create(p string) error {
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+KeyFile+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(keyHeader + hex.EncodeToString(k[:]) + "\n")
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Link(tmp.Name(), p)
}

func parseKey(b []byte) ([]byte, bool) {
	rest, ok := strings.CutPrefix(string(b), keyHeader)
	if !ok {
		return nil, false
	}
	k, err := hex.DecodeString(strings.TrimSpace(rest))
	if err != nil || len(k) != 32 {
		return nil, false
	}
	return k, true
}

// NewKey returns a key from raw bytes, for tests and tools that hold one
// already. It panics on a key shorter than 16 bytes.
func NewKey(raw []byte, domain string) *Key {
	if len(raw) < 16 {
		panic("cachemac: key too short")
	}
	return &Key{k: append([]byte(nil), raw...), domain: domain}
}

// New returns an HMAC-SHA256 that has consumed the domain and parts (each
// length-prefixed, so no two lists of parts frame alike); the caller
// writes the entry's bytes and calls Sum(nil).
func (k *Key) New(parts ...string) hash.Hash {
	h := hmac.New(sha256.New, k.k)
	var n [4]byte
	for _, p := range append([]string{"agentkernel cache", k.domain}, parts...) {
		binary.BigEndian.PutUint32(n[:], uint32(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return h
}

// Sum is the MAC of data stored under parts.
func (k *Key) Sum(data []byte, parts ...string) []byte {
	h := k.New(parts...)
	h.Write(data)
	return h.Sum(nil)
}

// Verify reports whether mac is the MAC of data stored under parts, in
// constant time.
func (k *Key) Verify(mac, data []byte, parts ...string) bool {
	return hmac.Equal(mac, k.Sum(data, parts...))
}

// Large entries (compiled machine code, tens of megabytes read at every
// start) are authenticated with GMAC rather than HMAC-SHA256: AES-256-GCM
// over the entry as additional data, about three and a half times faster
// per byte here (AES-NI and carry-less multiplication against SHA-NI),
// which keeps the check within a few percent of a cache load. The AES key
// is derived per entry from the cache's key and the entry's parts (so the
// parts are bound without copying the entry), and every write takes a
// fresh random 96-bit nonce, stored with the tag: a nonce is never reused
// under one key. Why: RATIONALE.md, "Caches are kernel files, and their
// entries are authenticated".

// LargeSize is the length of a large entry's MAC: its nonce and its tag.
const LargeSize = 12 + 16

// NewNonce returns a fresh random nonce for SumLarge.
func NewNonce() []byte {
	n := make([]byte, 12)
	if _, err := rand.Read(n); err != nil {
		panic("cachemac: no randomness: " + err.Error())
	}
	return n
}

// SumLarge is the MAC (nonce and tag, LargeSize bytes) of data stored
// under parts, with nonce (NewNonce for a new entry; the stored one to
// verify).
func (k *Key) SumLarge(nonce, data []byte, parts ...string) []byte {
	sub := k.New(append([]string{"gmac"}, parts...)...).Sum(nil) // 32 bytes: an AES-256 key
	blk, err := aes.NewCipher(sub)
	if err != nil {
		panic("cachemac: " + err.Error())
	}
	g, err := cipher.NewGCM(blk)
	if err != nil {
		panic("cachemac: " + err.Error())
	}
	out := append(make([]byte, 0, LargeSize), nonce...)
	return g.Seal(out, nonce, nil, data)
}

// VerifyLarge reports whether mac (as SumLarge made it) is the MAC of
// data stored under parts, in constant time.
func (k *Key) VerifyLarge(mac, data []byte, parts ...string) bool {
	if len(mac) != LargeSize {
		return false
	}
	return hmac.Equal(mac, k.SumLarge(mac[:12], data, parts...))
}

// sealMagic starts a sealed entry; its MAC and the payload follow.
const sealMagic = "AKMAC1\n"

// Seal returns payload with its MAC in front, for a cache that stores
// whole entries in files of its own (a tool list, a verdict).
func (k *Key) Seal(payload []byte, parts ...string) []byte {
	out := make([]byte, 0, len(sealMagic)+Size+len(payload))
	out = append(out, sealMagic...)
	out = append(out, k.Sum(payload, parts...)...)
	return append(out, payload...)
}

// Unseal returns the payload of a sealed entry stored under parts, or an
// error matching ErrForged when its MAC does not verify (or it is not a
// sealed entry at all: an older kernel's, or damaged).
func (k *Key) Unseal(b []byte, parts ...string) ([]byte, error) {
	rest, ok := bytes.CutPrefix(b, []byte(sealMagic))
	if !ok || len(rest) < Size {
		return nil, ErrForged
	}
	mac, payload := rest[:Size], rest[Size:]
	if !k.Verify(mac, payload, parts...) {
		return nil, ErrForged
	}
	return payload, nil
}
