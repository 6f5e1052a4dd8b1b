package main

import (
	"strings"
	"testing"
)

// TestServeListenNeedsTLSOffLoopback: plain HTTP on a non-loopback address
// is refused unless the risk is accepted.
func TestServeListenNeedsTLSOffLoopback(t *testing.T) {
	for _, c := range []struct {
		addr, cert, key string
		insecure        bool
		ok              bool
	}{
		{"127.0.0.1:8080", "", "", false, true},
		{"[::1]:8080", "", "", false, true},
		{"localhost:8080", "", "", false, true},
		{"0.0.0.0:8080", "", "", false, false},
		{"192.168.1.5:8080", "", "", false, false},
		{":8080", "", "", false, false},
		{"0.0.0.0:8080", "c.pem", "k.pem", false, true},
		{"0.0.0.0:8080", "", "", true, true},
		{"0.0.0.0:8080", "c.pem", "", false, false},
		{"nonsense", "", "", false, false},
	} {
		err := checkListen(c.addr, c.cert, c.key, c.insecure)
		if (err == nil) != c.ok {
			t.Errorf("checkListen(%q, tls=%v, insecure=%v) = %v, want ok=%v", c.addr, c.cert != "", c.insecure, err, c.ok)
		}
		if err != nil && c.addr == "0.0.0.0:8080" && c.cert == "" && !strings.Contains(err.Error(), "--tls-cert") {
			t.Errorf("the refusal does not say what to do: %v", err)
		}
	}
}

// TestKeysCommand: create prints the secret once on stdout, list shows
// no secret, revoke revokes.
func TestKeysCommand(t *testing.T) {
	dir := t.TempDir()
	keys := dir + "/keys.json"
	out, errOut, err := cli(t, "keys", "create", "ci", "--scopes", "run,read", "--keys", keys)
	if err != nil {
		t.Fatalf("create: %v\n%s", err, errOut)
	}
	secret := strings.TrimSpace(out)
	if !strings.HasPrefix(secret, "aks_") || !strings.Contains(errOut, "shown once") {
		t.Fatalf("create printed %q / %q", out, errOut)
	}
	out, _, err = cli(t, "keys", "list", "--keys", keys)
	if err != nil || !strings.Contains(out, "ci") || !strings.Contains(out, "run,read") || strings.Contains(out, secret[4:]) {
		t.Fatalf("list = %q, %v", out, err)
	}
	if _, _, err := cli(t, "keys", "create", "ci", "--scopes", "run", "--keys", keys); err == nil {
		t.Fatal("a second active key with the same name was created")
	}
	if _, _, err := cli(t, "keys", "create", "x", "--scopes", "root", "--keys", keys); err == nil || !strings.Contains(err.Error(), "unknown scope") {
		t.Fatalf("unknown scope: %v", err)
	}
	if _, errOut, err := cli(t, "keys", "revoke", "ci", "--keys", keys); err != nil || !strings.Contains(errOut, "revoked") {
		t.Fatalf("revoke: %v %s", err, errOut)
	}
	out, _, _ = cli(t, "keys", "list", "--keys", keys)
	if !strings.Contains(out, "revoked") {
		t.Fatalf("list after revoke = %q", out)
	}
}
