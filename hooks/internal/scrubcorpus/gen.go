package main

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
)

// The value generators. Every value is random and fake; each follows the
// shape the public rule sets (gitleaks' config/gitleaks.toml, trufflehog's
// detectors) give for its family, so that what the scrubber learns is the
// format, not a sample.

const (
	upperDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	awsAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	alnum       = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b64url      = alnum + "-_"
	b64std      = alnum + "+/"
	hexLower    = "0123456789abcdef"
	lowerAlnum  = "abcdefghijklmnopqrstuvwxyz0123456789"
	letters     = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	base58      = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
	bech32      = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
	crockford   = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	passChars   = alnum + "!#%&*+-.=?@^_~"
)

type gen struct{ r *rand.Rand }

func (g gen) pick(alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[g.r.IntN(len(alphabet))]
	}
	return string(b)
}

// mixed is pick until the value has an upper, a lower and a digit where
// the alphabet has them (what a real random token of that alphabet has,
// nearly always).
func (g gen) mixed(alphabet string, n int) string {
	for {
		s := g.pick(alphabet, n)
		ok := true
		for _, class := range []string{"0123456789", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz"} {
			if strings.ContainsAny(alphabet, class) && !strings.ContainsAny(s, class) {
				ok = false
			}
		}
		if ok {
			return s
		}
	}
}

func (g gen) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.r.IntN(256))
	}
	return b
}

func (g gen) hex(n int) string    { return g.pick(hexLower, n) }
func (g gen) digits(n int) string { return g.pick("0123456789", n) }

// password is a human-chosen-looking password: a word, digits, a symbol.
func (g gen) password() string {
	words := []string{"Summer", "orange", "Falcon", "river", "Nebula", "copper", "Winter", "maple", "Tiger", "velvet"}
	syms := "!#%&*@^"
	return words[g.r.IntN(len(words))] + g.digits(2+g.r.IntN(3)) + string(syms[g.r.IntN(len(syms))]) + g.pick(alnum, 3+g.r.IntN(4))
}

func (g gen) uuid() string {
	h := g.hex(32)
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:]
}

func (g gen) jwt() string {
	hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	body := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"sub":"%s","iat":%d,"exp":%d,"scope":"admin"}`, g.digits(8), 1700000000+g.r.IntN(9999999), 1800000000+g.r.IntN(9999999))))
	return hdr + "." + body + "." + base64.RawURLEncoding.EncodeToString(g.bytes(32))
}

func (g gen) pem(label string, lines int) string {
	var b strings.Builder
	b.WriteString("-----BEGIN " + label + "-----\n")
	for range lines {
		b.WriteString(base64.StdEncoding.EncodeToString(g.bytes(48)) + "\n")
	}
	b.WriteString(base64.StdEncoding.EncodeToString(g.bytes(20)) + "\n")
	b.WriteString("-----END " + label + "-----")
	return b.String()
}

func (g gen) b64(n int) string { return base64.StdEncoding.EncodeToString(g.bytes(n)) }

// ethAddress is an EIP-55 looking address: hex with mixed case.
func (g gen) ethAddress() string {
	h := []byte(g.hex(40))
	for i := range h {
		if h[i] >= 'a' && g.r.IntN(2) == 0 {
			h[i] -= 32
		}
	}
	return "0x" + string(h)
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }
