package hooks

import "strings"

// Public values that look like secrets. The entropy detector and the
// keyword detector ask publicValue before reporting a token: values that
// are public by their format (a 0x-hex hash or address, a publishable key,
// a bech32 or base58 address, a content id) or by the name they are given
// (a public key, an address, a site key, a digest), and the public
// parameters of a JSON Web Key. Each test is about what the value is, not
// about a corpus: RATIONALE.md, "The scrubber: formats first, public
// values named".

// publicPrefixes start values that are public by design: Stripe's
// publishable keys, Mapbox's public tokens, age and Nostr public keys.
var publicPrefixes = []string{"pk_live_", "pk_test_", "pk.eyJ", "npub1"}

// bech32HRPs are the human-readable parts of bech32 addresses and keys
// that are public: Bitcoin, Litecoin, Cosmos chains, Cardano, age.
var bech32HRPs = []string{"bc1", "tb1", "bcrt1", "ltc1", "tltc1", "cosmos1", "osmo1", "terra1", "addr1", "stake1", "age1"}

// publicNames are key names (or their last word) that hold public values.
var publicNames = []string{"public", "pubkey", "address", "sitekey", "publishable", "fingerprint", "thumbprint",
	"checksum", "digest", "hash", "txid", "cid", "uuid", "commit", "sha", "etag", "wallet", "owner", "mint", "recipient"}

// jwkPublicParams are the JSON Web Key parameters of a public key (RFC
// 7518): the modulus, exponent and curve point, the key's id and
// certificate thumbprints. The private parameters (d, p, q, dp, dq, qi,
// k) are not here.
var jwkPublicParams = []string{"n", "e", "x", "y", "kid", "x5t", "x5t#S256"}

// publicValue reports whether tok, found at t[s:], is a public value.
func publicValue(t string, s int, tok string) bool {
	if publicByFormat(tok) || identifierPath(t, s) {
		return true
	}
	key := keyBefore(t, s)
	if key == "" {
		return false
	}
	if keyKindOf(key) != kindNone {
		return false // a secret's name wins
	}
	lk := strings.ToLower(key)
	for _, n := range jwkPublicParams {
		if lk == n || lk == strings.ToLower(n) {
			return jwkNearby(t, s)
		}
	}
	// Compared as keywords are (keyKindOf): without case, '_' or '-', so
	// that site_key, siteKey and SITE-KEY are one name.
	folded := strings.NewReplacer("_", "", "-", "").Replace(lk)
	for _, n := range publicNames {
		if strings.Contains(folded, n) {
			return true
		}
	}
	return false
}

// publicByFormat reports values public by their shape alone.
func publicByFormat(tok string) bool {
	for _, p := range publicPrefixes {
		if strings.HasPrefix(tok, p) {
			return true
		}
	}
	if (strings.HasPrefix(tok, "0x") || strings.HasPrefix(tok, "0X")) && len(tok) >= 10 && allHex(tok[2:]) {
		return true // hashes, addresses, pointers
	}
	for _, h := range bech32HRPs {
		if strings.HasPrefix(tok, h) && len(tok) >= len(h)+20 && allIn(tok[len(h):], bech32Lower) {
			return true
		}
	}
	if (strings.HasPrefix(tok, "bafy") || strings.HasPrefix(tok, "bafk")) && len(tok) >= 50 && allIn(tok, "abcdefghijklmnopqrstuvwxyz234567") {
		return true // IPFS CIDv1
	}
	// Base58 with the structure of a Bitcoin address (P2PKH '1', P2SH
	// '3', 26 to 35 characters) or of an IPFS CIDv0 ("Qm", 46): a random
	// base62 secret has that shape about three times in a thousand.
	if n := len(tok); ((tok[0] == '1' || tok[0] == '3') && n >= 26 && n <= 35 || n == 46 && strings.HasPrefix(tok, "Qm")) && allIn(tok, base58Alphabet) {
		return true
	}
	return false
}

// identifierPaths are URL path segments (and URI schemes) after which a
// token names a public object: a blockchain explorer's address,
// account, transaction or block, a content id.
var identifierPaths = []string{"/address/", "/addr/", "/account/", "/accounts/", "/tx/", "/txs/", "/transaction/", "/block/", "/ipfs/", "/ipns/", "/token/", "bitcoin:", "ethereum:", "solana:"}

// identifierPath reports a token that follows one of identifierPaths.
func identifierPath(t string, s int) bool {
	before := t[max(0, s-16):s]
	for _, p := range identifierPaths {
		if strings.HasSuffix(before, p) {
			return true
		}
	}
	return false
}

const (
	bech32Lower    = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
	base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
)

func allHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return s != ""
}

func allIn(s, alphabet string) bool {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(alphabet, s[i]) < 0 {
			return false
		}
	}
	return s != ""
}

// keyBefore is the name a value at t[s:] is given, if it has one: the
// identifier before it, past quotes, spaces and one of ':', '=', ':=',
// '=>' (JSON, YAML, env files, HTML attributes, "PublicKey = ..."). It
// is "" for a value in running text.
func keyBefore(t string, s int) string {
	i := s
	for i > 0 && (t[i-1] == '"' || t[i-1] == '\'' || t[i-1] == ' ' || t[i-1] == '\t') {
		i--
	}
	if i == 0 {
		return ""
	}
	switch t[i-1] {
	case ':', '=':
		i--
		if i > 0 && (t[i-1] == ':' || t[i-1] == '=') {
			i--
		}
	case '>':
		if i > 1 && t[i-2] == '=' {
			i -= 2
		} else {
			return ""
		}
	default:
		return ""
	}
	for i > 0 && (t[i-1] == '"' || t[i-1] == '\'' || t[i-1] == ' ' || t[i-1] == '\t') {
		i--
	}
	e := i
	for i > 0 && (isIdentChar(t[i-1]) || t[i-1] == '#') {
		i--
	}
	return strings.TrimLeft(t[i:e], ".-")
}

// jwkNearby reports a JSON Web Key around t[s]: its key type, or the
// usual public exponent.
func jwkNearby(t string, s int) bool {
	w := t[max(0, s-2048):min(len(t), s+2048)] // an 8192-bit modulus is 1,366 characters
	return strings.Contains(w, "kty") || strings.Contains(w, "AQAB")
}
