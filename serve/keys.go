package serve

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentkernel/agentkernel/internal/privfile"
)

// KeyPrefix starts every API key secret. The credential scrubber knows the
// format (hooks: "agentkernel_api_key"), so a key that reaches a log, an
// event or a tool's output is redacted.
const KeyPrefix = "aks_"

// Key is an API key as the key file keeps it: never the secret, only its
// SHA-256. Keys are checked at the edge; the kernel sees only the name
// (the principal it records) and serve the owner (whose sessions these
// are).
type Key struct {
	ID     string  `json:"id"`
	Name   string  `json:"name"`
	Scopes []Scope `json:"scopes"`
	// Tenant, when set, owns the sessions the key creates, and every key
	// of the tenant sees them; otherwise the key alone owns its sessions.
	Tenant  string    `json:"tenant,omitempty"`
	Hash    string    `json:"hash"`
	Created time.Time `json:"created"`
	Revoked time.Time `json:"revoked,omitzero"`
}

// Owner is the owner recorded on the sessions the key creates.
func (k *Key) Owner() string {
	if k.Tenant != "" {
		return "tenant:" + k.Tenant
	}
	return "key:" + k.ID
}

// Has reports whether the key carries scope (admin carries every scope).
func (k *Key) Has(scope Scope) bool {
	return slices.Contains(k.Scopes, scope) || slices.Contains(k.Scopes, ScopeAdmin)
}

// Active reports whether the key is not revoked.
func (k *Key) Active() bool { return k.Revoked.IsZero() }

// Errors of the key file.
var (
	ErrKeyNotFound = errors.New("no such key")
	ErrKeyExists   = errors.New("a key with that name exists")
)

// KeyStore is the key file: JSON, mode 0600, in a 0700 directory, written
// whole under a temporary name and renamed into place, never through a
// symbolic link. A running server rereads it when it changes (at most once
// a second), so a revocation takes effect without a restart. It is safe
// for concurrent use, and by several processes (writes hold a lock file).
// Why: RATIONALE.md, "API keys: SHA-256 in a file beside the store".
type KeyStore struct {
	path string
	now  func() time.Time
	warn func(string) // a repaired mode, or nil

	mu      sync.Mutex
	keys    map[string]*Key // by id
	stamp   fileStamp
	checked time.Time
	err     error
}

type fileStamp struct {
	ino, size int64
	mtime     time.Time
}

type keyFile struct {
	Version int    `json:"version"`
	Keys    []*Key `json:"keys"`
}

// OpenKeys opens (without creating) the key file at path; a missing file
// holds no keys. warn (may be nil) hears of a mode the key store narrowed.
func OpenKeys(path string, warn func(string)) (*KeyStore, error) {
	if path == "" {
		return nil, errors.New("open keys: empty file name")
	}
	ks := &KeyStore{path: path, now: time.Now, warn: warn}
	if err := ks.reload(true); err != nil {
		return nil, err
	}
	return ks, nil
}

// Path is the key file's name.
func (ks *KeyStore) Path() string { return ks.path }

var keyNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// checkScopes checks a list of scopes and returns it in the list's
// order, without repeats.
func checkScopes(names []string) ([]Scope, error) {
	all := Scopes()
	want := func() string {
		w := make([]string, len(all))
		for i, s := range all {
			w[i] = string(s)
		}
		return strings.Join(w, ", ")
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("a key needs at least one scope (%s)", want())
	}
	out := make([]Scope, 0, len(names))
	for _, n := range names {
		s := Scope(strings.TrimSpace(n))
		if a, ok := strings.CutPrefix(string(s), ScopeAgentPrefix); ok {
			if !agentScopeRE.MatchString(a) {
				return nil, fmt.Errorf("scope %q: want agent:NAME or agent:pipeline:NAME, NAME an agent of kernel.yaml", s)
			}
		} else if !slices.Contains(all, s) {
			return nil, fmt.Errorf("unknown scope %q (want %s, or agent:NAME)", n, want())
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Scope) int {
		if d := scopeRank(a) - scopeRank(b); d != 0 {
			return d
		}
		return strings.Compare(string(a), string(b))
	})
	if slices.IndexFunc(out, func(s Scope) bool { return !strings.HasPrefix(string(s), ScopeAgentPrefix) }) < 0 {
		return nil, fmt.Errorf("agent:NAME scopes only restrict a key: give it %s too", want())
	}
	return out, nil
}

var agentScopeRE = regexp.MustCompile(`^(pipeline:)?[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// scopeRank orders scopes as shown: the list's order, then agent scopes
// by name.
func scopeRank(s Scope) int {
	if i := slices.Index(Scopes(), s); i >= 0 {
		return i - 1000
	}
	return 0
}

// Create adds a key and returns it with its secret, which is shown once
// and never stored.
func (ks *KeyStore) Create(name, tenant string, scopes []string) (*Key, string, error) {
	if !keyNameRE.MatchString(name) {
		return nil, "", fmt.Errorf("key name %q: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	if tenant != "" && !keyNameRE.MatchString(tenant) {
		return nil, "", fmt.Errorf("tenant %q: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", tenant)
	}
	checked, err := checkScopes(scopes)
	if err != nil {
		return nil, "", err
	}
	var idb [6]byte
	var sec [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return nil, "", err
	}
	if _, err := rand.Read(sec[:]); err != nil {
		return nil, "", err
	}
	id := hex.EncodeToString(idb[:])
	secret := base64.RawURLEncoding.EncodeToString(sec[:])
	k := &Key{ID: id, Name: name, Tenant: tenant, Scopes: checked, Hash: hashSecret(secret), Created: ks.now().UTC().Truncate(time.Second)}
	err = ks.update(func(f *keyFile) error {
		for _, o := range f.Keys {
			if o.Name == name && o.Active() {
				return fmt.Errorf("key %q: %w (revoke it first, or choose another name)", name, ErrKeyExists)
			}
		}
		f.Keys = append(f.Keys, k)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return k, KeyPrefix + id + "_" + secret, nil
}

// Revoke revokes the active key with the given name or id.
func (ks *KeyStore) Revoke(nameOrID string) (*Key, error) {
	var out *Key
	err := ks.update(func(f *keyFile) error {
		for _, k := range f.Keys {
			if k.Active() && (k.Name == nameOrID || k.ID == nameOrID) {
				k.Revoked = ks.now().UTC().Truncate(time.Second)
				out = k
				return nil
			}
		}
		return fmt.Errorf("key %q: %w (kernel keys list shows them)", nameOrID, ErrKeyNotFound)
	})
	return out, err
}

// List returns every key, revoked ones included, oldest first.
func (ks *KeyStore) List() ([]Key, error) {
	if err := ks.reload(true); err != nil {
		return nil, err
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	out := make([]Key, 0, len(ks.keys))
	for _, k := range ks.keys {
		out = append(out, *k)
	}
	slices.SortFunc(out, func(a, b Key) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Authenticate returns the active key whose secret is token. The secret's
// hash is compared in constant time; the id part only finds the record.
func (ks *KeyStore) Authenticate(token string) (*Key, bool) {
	rest, ok := strings.CutPrefix(token, KeyPrefix)
	if !ok {
		return nil, false
	}
	id, secret, ok := strings.Cut(rest, "_")
	if !ok || id == "" || secret == "" {
		return nil, false
	}
	_ = ks.reload(false) // a broken rewrite keeps the keys last read
	ks.mu.Lock()
	k := ks.keys[id]
	ks.mu.Unlock()
	want := hashSecret(secret)
	if k == nil {
		// Compare anyway, so an unknown id costs what a wrong secret does.
		subtle.ConstantTimeCompare([]byte(want), []byte(strings.Repeat("0", len(want))))
		return nil, false
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(k.Hash)) != 1 || !k.Active() {
		return nil, false
	}
	c := *k
	return &c, true
}

// active reports whether the key with this id is in the file as last
// read, and not revoked.
func (ks *KeyStore) active(id string) bool {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	k := ks.keys[id]
	return k != nil && k.Active()
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// reload rereads the file when it changed since the last read; unless
// force, it looks at most once a second.
func (ks *KeyStore) reload(force bool) error {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	now := time.Now()
	if !force && now.Sub(ks.checked) < time.Second {
		return ks.err
	}
	ks.checked = now
	f, stamp, err := readKeyFile(ks.path, ks.warn)
	if err == nil && stamp == ks.stamp && ks.keys != nil {
		return nil
	}
	if err != nil {
		ks.err = err
		if ks.keys == nil {
			ks.keys = map[string]*Key{}
		}
		return err
	}
	ks.err = nil
	ks.stamp = stamp
	ks.keys = make(map[string]*Key, len(f.Keys))
	for _, k := range f.Keys {
		ks.keys[k.ID] = k
	}
	return nil
}

// readKeyFile reads the key file with privfile's checks: never through a
// symbolic link, a regular file of this user nobody else can write (one
// others could only read is narrowed to 0600, and warn says so). A
// missing file is an empty one.
func readKeyFile(path string, warn func(string)) (*keyFile, fileStamp, error) {
	file, fi, err := privfile.Open(path, warn)
	if errors.Is(err, fs.ErrNotExist) {
		return &keyFile{Version: 1}, fileStamp{}, nil
	}
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("key file: %w", err)
	}
	defer file.Close()
	stamp := fileStamp{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		stamp.ino = int64(st.Ino)
	}
	b, err := io.ReadAll(io.LimitReader(file, 16<<20))
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("read key file: %w", err)
	}
	var f keyFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fileStamp{}, fmt.Errorf("key file %s: %w", path, err)
	}
	if f.Version != 1 {
		return nil, fileStamp{}, fmt.Errorf("key file %s: version %d (this kernel reads version 1)", path, f.Version)
	}
	for i, k := range f.Keys {
		if k == nil || k.ID == "" || !strings.HasPrefix(k.Hash, "sha256:") {
			return nil, fileStamp{}, fmt.Errorf("key file %s: keys[%d] has no id or hash", path, i)
		}
	}
	return &f, stamp, nil
}

// update changes the key file under its lock: read, fn, write whole.
func (ks *KeyStore) update(fn func(*keyFile) error) error {
	if err := privfile.Parent(ks.path, "the directory of the key file"); err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	unlock, err := privfile.Lock(ks.path + ".lock")
	if err != nil {
		return fmt.Errorf("lock key file: %w", err)
	}
	defer unlock()
	f, _, err := readKeyFile(ks.path, ks.warn)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		return err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := privfile.WriteFile(ks.path, append(b, '\n'), true); err != nil {
		return fmt.Errorf("write key file: %w", err)
	}
	return ks.reload(true)
}
