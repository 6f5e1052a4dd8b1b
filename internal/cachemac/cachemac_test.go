package cachemac

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func privateDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestKeyFile: the key is created 0600 on first use and the same key is
// read back; two processes starting at once agree on one key.
func TestKeyFile(t *testing.T) {
	dir := privateDir(t)
	var keys [8]*Key
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := Open(dir, "wasm", nil)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if k == nil || !bytes.Equal(k.k, keys[0].k) {
			t.Fatal("concurrent opens made different keys")
		}
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	again, err := Open(dir, "wasm", nil)
	if err != nil || !bytes.Equal(again.k, keys[0].k) {
		t.Fatalf("reopened a different key: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
}

// TestKeyFileReplacedWhenUntrusted: a key file others could write, a
// symbolic link or garbage is replaced by a new key with one warning, so
// what was made with the old one no longer verifies.
func TestKeyFileReplacedWhenUntrusted(t *testing.T) {
	for name, plant := range map[string]func(p string){
		"group-writable": func(p string) { os.Chmod(p, 0o660) },
		"garbage":        func(p string) { os.WriteFile(p, []byte("hello"), 0o600) },
		"symlink": func(p string) {
			other := filepath.Join(filepath.Dir(filepath.Dir(p)), "planted.key")
			b, _ := os.ReadFile(p)
			os.WriteFile(other, b, 0o600)
			os.Remove(p)
			os.Symlink(other, p)
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := privateDir(t)
			old, err := Open(dir, "policy", nil)
			if err != nil {
				t.Fatal(err)
			}
			sealed := old.Seal([]byte("verdict"), "entry")
			plant(filepath.Join(dir, KeyFile))
			var warned []string
			k, err := Open(dir, "policy", func(m string) { warned = append(warned, m) })
			if err != nil {
				t.Fatal(err)
			}
			if len(warned) != 1 || !strings.Contains(warned[0], "made a new one") {
				t.Errorf("warnings %q", warned)
			}
			if _, err := k.Unseal(sealed, "entry"); !errors.Is(err, ErrForged) {
				t.Errorf("an entry of the replaced key still verifies: %v", err)
			}
		})
	}
}

// TestUnsealRefusesForgeries: an edited, truncated, moved (another name
// or another cache) or other-key entry, and one with no MAC, fail.
func TestUnsealRefusesForgeries(t *testing.T) {
	k := NewKey(bytes.Repeat([]byte{1}, 32), "mcp")
	other := NewKey(bytes.Repeat([]byte{2}, 32), "mcp")
	otherCache := NewKey(bytes.Repeat([]byte{1}, 32), "plugins")
	payload := []byte(`[{"name":"read"}]`)
	good := k.Seal(payload, "server-a")
	if got, err := k.Unseal(good, "server-a"); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("%q %v", got, err)
	}
	edited := bytes.Clone(good)
	edited[len(edited)-3] ^= 1
	for name, tc := range map[string]struct {
		b    []byte
		name string
		k    *Key
	}{
		"edited":      {edited, "server-a", k},
		"truncated":   {good[:len(good)-2], "server-a", k},
		"short":       {good[:10], "server-a", k},
		"moved":       {good, "server-b", k},
		"other key":   {good, "server-a", other},
		"other cache": {good, "server-a", otherCache},
		"unsealed":    {payload, "server-a", k},
	} {
		if got, err := tc.k.Unseal(tc.b, tc.name); !errors.Is(err, ErrForged) {
			t.Errorf("%s: %q %v", name, got, err)
		}
	}
	// Length-prefixed parts: ("ab","c") and ("a","bc") differ.
	if bytes.Equal(k.Sum(nil, "ab", "c"), k.Sum(nil, "a", "bc")) {
		t.Error("parts are not framed")
	}
}

// TestLargeMAC: a large entry's MAC verifies only for the same bytes,
// parts and key; a fresh nonce gives a fresh tag.
func TestLargeMAC(t *testing.T) {
	k := NewKey(bytes.Repeat([]byte{1}, 32), "wasm")
	data := bytes.Repeat([]byte("machine code "), 1000)
	mac := k.SumLarge(NewNonce(), data, "module", "entry")
	if len(mac) != LargeSize || !k.VerifyLarge(mac, data, "module", "entry") {
		t.Fatal("a genuine entry does not verify")
	}
	if other := k.SumLarge(NewNonce(), data, "module", "entry"); bytes.Equal(other, mac) {
		t.Error("two nonces gave one MAC")
	}
	edited := bytes.Clone(data)
	edited[len(edited)/2] ^= 1
	for name, ok := range map[string]bool{
		"edited":        k.VerifyLarge(mac, edited, "module", "entry"),
		"truncated":     k.VerifyLarge(mac, data[:len(data)-1], "module", "entry"),
		"another name":  k.VerifyLarge(mac, data, "module", "other"),
		"another key":   NewKey(bytes.Repeat([]byte{2}, 32), "wasm").VerifyLarge(mac, data, "module", "entry"),
		"another cache": NewKey(bytes.Repeat([]byte{1}, 32), "policy").VerifyLarge(mac, data, "module", "entry"),
		"short mac":     k.VerifyLarge(mac[:20], data, "module", "entry"),
	} {
		if ok {
			t.Errorf("%s: verifies", name)
		}
	}
}

func BenchmarkLargeMAC(b *testing.B) {
	k := NewKey(bytes.Repeat([]byte{1}, 32), "wasm")
	data := make([]byte, 16<<20)
	nonce := NewNonce()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		k.SumLarge(nonce, data, "m", "e")
	}
}
