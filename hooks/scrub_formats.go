package hooks

import (
	"slices"
	"strings"
)

// finder collects the findings of one text.
type finder struct {
	text string
	out  []Finding
	// quiet are spans where entropy detection is off: certificates and
	// public keys are public and look random.
	quiet [][2]int
	// valueEnd is where the last value of a credential key ended; keys
	// before it are part of that value (this keeps the scan linear).
	valueEnd int
}

func (f *finder) add(start, end int, class string) {
	f.out = append(f.out, Finding{Start: start, End: end, Class: class})
}

// Byte classes, looked up in a table: the detectors scan every byte.
const (
	cLower uint8 = 1 << iota
	cUpper
	cDigit
	cToken // [A-Za-z0-9+/_-]: the high-entropy detector's tokens
	cIdent // [A-Za-z0-9_.-]: key names
	cStart // may start a format detector
)

var classes = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		switch {
		case 'a' <= b && b <= 'z':
			t[c] |= cLower
		case 'A' <= b && b <= 'Z':
			t[c] |= cUpper
		case '0' <= b && b <= '9':
			t[c] |= cDigit
		}
		if t[c] != 0 || b == '+' || b == '/' || b == '_' || b == '-' {
			t[c] |= cToken
		}
		if t[c]&(cLower|cUpper|cDigit) != 0 || b == '_' || b == '.' || b == '-' {
			t[c] |= cIdent
		}
	}
	return t
}()

func init() {
	for c := range formatsByByte {
		if len(formatsByByte[c]) > 0 {
			classes[c] |= cStart
		}
	}
	for _, c := range []byte("eBb0123456789") {
		classes[c] |= cStart
	}
}

func isDigit(c byte) bool { return classes[c]&cDigit != 0 }
func isUpper(c byte) bool { return classes[c]&cUpper != 0 }
func isLower(c byte) bool { return classes[c]&cLower != 0 }
func isLetter(c byte) bool {
	return classes[c]&(cLower|cUpper) != 0
}
func isAlnum(c byte) bool { return classes[c]&(cLower|cUpper|cDigit) != 0 }
func isHex(c byte) bool {
	return isDigit(c) || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// isB64URL is the base64url alphabet.
func isB64URL(c byte) bool { return isAlnum(c) || c == '-' || c == '_' }

// privateKeys finds PEM private key blocks, and marks certificate and
// public key blocks quiet.
func (f *finder) privateKeys() {
	t := f.text
	if !strings.Contains(t, "-----BEGIN ") {
		return
	}
	ends := pemEnds(t)
	for i := 0; ; {
		k := strings.Index(t[i:], "-----BEGIN ")
		if k < 0 {
			return
		}
		start := i + k
		label, hdrEnd, ok := pemLabel(t, start+len("-----BEGIN "))
		if !ok {
			i = start + len("-----BEGIN ")
			continue
		}
		end := -1
		// The first END line of this label after the header.
		if pos := ends[label]; len(pos) > 0 {
			if j, _ := slices.BinarySearchFunc(pos, hdrEnd, func(p [2]int, at int) int { return p[0] - at }); j < len(pos) {
				end = pos[j][1]
			}
		}
		if strings.Contains(label, "PRIVATE KEY") {
			if end < 0 {
				end = len(t) // a truncated key is still a key
			}
			f.add(start, end, "private_key")
		} else if end > 0 {
			f.quiet = append(f.quiet, [2]int{start, end})
		} else {
			end = hdrEnd
		}
		i = end
	}
}

// pemLabel reads the label of a PEM line from ls (after "-----BEGIN " or
// "-----END ") to the closing "-----".
func pemLabel(t string, ls int) (label string, end int, ok bool) {
	e := strings.Index(t[ls:min(len(t), ls+70)], "-----")
	if e < 0 || e > 64 {
		return "", 0, false
	}
	return t[ls : ls+e], ls + e + len("-----"), true
}

// pemEnds indexes the END lines of t by label: start and end of each, in
// order.
func pemEnds(t string) map[string][][2]int {
	ends := map[string][][2]int{}
	for i := 0; ; {
		k := strings.Index(t[i:], "-----END ")
		if k < 0 {
			return ends
		}
		s := i + k
		label, e, ok := pemLabel(t, s+len("-----END "))
		if !ok {
			i = s + len("-----END ")
			continue
		}
		ends[label] = append(ends[label], [2]int{s, e})
		i = e
	}
}

// urlCredentials finds the password of scheme://user:password@host.
func (f *finder) urlCredentials() {
	t := f.text
	for i := 0; ; {
		k := strings.Index(t[i:], "://")
		if k < 0 {
			return
		}
		p := i + k
		i = p + 3
		s := p
		for s > 0 && (isAlnum(t[s-1]) || t[s-1] == '+' || t[s-1] == '.' || t[s-1] == '-') {
			s--
		}
		if s == p || !isLetter(t[s]) {
			continue
		}
		at, colon := -1, -1
		j := p + 3
	authority:
		for ; j < len(t); j++ {
			switch c := t[j]; c {
			case '@':
				at = j
			case ':':
				if at < 0 && colon < 0 {
					colon = j
				}
			case '?', '#':
				// Unencoded in a password ("p#ss"), as people write
				// them; after the host they start the query or fragment.
				if at >= 0 || colon < 0 {
					break authority
				}
			case '/', '"', '\'', '`', '<', '>', ' ', '\t', '\n', '\r':
				break authority
			}
		}
		if at < 0 || colon < 0 || colon > at {
			continue
		}
		pw := t[colon+1 : at]
		if pw == "" || placeholder(pw) || pw == t[p+3:colon] {
			continue // no password, a placeholder, or a documented default (guest:guest)
		}
		f.add(colon+1, at, "url_credentials")
		i = at
	}
}

// format is a token format recognised by its prefix.
type format struct {
	prefix string
	class  string
	body   func(byte) bool
	min    int // body length bounds
	max    int
	// keepPrefix redacts only the body (webhook URLs).
	keepPrefix bool
	// check, when set, vets the body.
	check func(body string) bool
}

var formats = []format{
	// AWS access key ids.
	{prefix: "AKIA", class: "aws_access_key", body: isUpperDigit, min: 16, max: 16},
	{prefix: "ASIA", class: "aws_access_key", body: isUpperDigit, min: 16, max: 16},
	{prefix: "ABIA", class: "aws_access_key", body: isUpperDigit, min: 16, max: 16},
	{prefix: "ACCA", class: "aws_access_key", body: isUpperDigit, min: 16, max: 16},
	{prefix: "AGPA", class: "aws_access_key", body: isUpperDigit, min: 16, max: 16},
	{prefix: "AIDA", class: "aws_access_key", body: isUpperDigit, min: 16, max: 16},
	{prefix: "AIPA", class: "aws_access_key", body: isUpperDigit, min: 16, max: 16},
	{prefix: "ANPA", class: "aws_access_key", body: isUpperDigit, min: 16, max: 16},
	{prefix: "ANVA", class: "aws_access_key", body: isUpperDigit, min: 16, max: 16},
	{prefix: "APKA", class: "aws_access_key", body: isUpperDigit, min: 16, max: 16},
	{prefix: "AROA", class: "aws_access_key", body: isUpperDigit, min: 16, max: 16},
	// Google API keys.
	{prefix: "AIza", class: "google_api_key", body: isB64URL, min: 35, max: 35},
	// GitHub.
	{prefix: "ghp_", class: "github_token", body: isAlnum, min: 30, max: 255},
	{prefix: "gho_", class: "github_token", body: isAlnum, min: 30, max: 255},
	{prefix: "ghu_", class: "github_token", body: isAlnum, min: 30, max: 255},
	{prefix: "ghs_", class: "github_token", body: isAlnum, min: 30, max: 255},
	{prefix: "ghr_", class: "github_token", body: isAlnum, min: 30, max: 255},
	{prefix: "github_pat_", class: "github_token", body: isB64URL, min: 40, max: 255},
	// GitLab.
	{prefix: "glpat-", class: "gitlab_token", body: isB64URL, min: 20, max: 255},
	{prefix: "glptt-", class: "gitlab_token", body: isB64URL, min: 20, max: 255},
	{prefix: "gldt-", class: "gitlab_token", body: isB64URL, min: 20, max: 255},
	// Slack.
	{prefix: "xoxb-", class: "slack_token", body: isAlnumDash, min: 10, max: 255, check: hasDigit},
	{prefix: "xoxp-", class: "slack_token", body: isAlnumDash, min: 10, max: 255, check: hasDigit},
	{prefix: "xoxa-", class: "slack_token", body: isAlnumDash, min: 10, max: 255, check: hasDigit},
	{prefix: "xoxr-", class: "slack_token", body: isAlnumDash, min: 10, max: 255, check: hasDigit},
	{prefix: "xoxs-", class: "slack_token", body: isAlnumDash, min: 10, max: 255, check: hasDigit},
	{prefix: "xoxe-", class: "slack_token", body: isAlnumDash, min: 10, max: 255, check: hasDigit},
	{prefix: "xapp-", class: "slack_token", body: isAlnumDash, min: 10, max: 255, check: hasDigit},
	{prefix: "https://hooks.slack.com/services/", class: "slack_webhook", body: isPathChar, min: 20, max: 255, keepPrefix: true},
	{prefix: "https://discord.com/api/webhooks/", class: "discord_webhook", body: isPathChar, min: 20, max: 255, keepPrefix: true},
	{prefix: "https://discordapp.com/api/webhooks/", class: "discord_webhook", body: isPathChar, min: 20, max: 255, keepPrefix: true},
	// OpenAI-style keys (OpenAI, Anthropic, DeepSeek, ...).
	// agentkernel's own API keys (kernel keys create): aks_<id>_<secret>.
	{prefix: "aks_", class: "agentkernel_api_key", body: isB64URL, min: 40, max: 80},
	{prefix: "sk-", class: "openai_key", body: isB64URL, min: 20, max: 255, check: digitAndLetter},
	// Stripe.
	{prefix: "sk_live_", class: "stripe_key", body: isAlnum, min: 16, max: 255},
	{prefix: "sk_test_", class: "stripe_key", body: isAlnum, min: 16, max: 255},
	{prefix: "rk_live_", class: "stripe_key", body: isAlnum, min: 16, max: 255},
	{prefix: "rk_test_", class: "stripe_key", body: isAlnum, min: 16, max: 255},
	{prefix: "whsec_", class: "stripe_key", body: isBase64Char, min: 24, max: 255},
	// Others.
	{prefix: "npm_", class: "npm_token", body: isAlnum, min: 36, max: 36},
	{prefix: "hf_", class: "huggingface_token", body: isAlnum, min: 30, max: 40, check: digitOrMixedCase},
	{prefix: "SG.", class: "sendgrid_key", body: isSendGrid, min: 60, max: 70, check: hasDot},
	{prefix: "dop_v1_", class: "digitalocean_token", body: isHex, min: 64, max: 64},
	{prefix: "doo_v1_", class: "digitalocean_token", body: isHex, min: 64, max: 64},
	{prefix: "dor_v1_", class: "digitalocean_token", body: isHex, min: 64, max: 64},
	{prefix: "shpat_", class: "shopify_token", body: isHex, min: 32, max: 32},
	{prefix: "shpss_", class: "shopify_token", body: isHex, min: 32, max: 32},
	{prefix: "shpca_", class: "shopify_token", body: isHex, min: 32, max: 32},
	{prefix: "shppa_", class: "shopify_token", body: isHex, min: 32, max: 32},
	{prefix: "pypi-AgEIcHlwaS5vcmc", class: "pypi_token", body: isB64URL, min: 50, max: 512},
	{prefix: "key-", class: "mailgun_key", body: isHex, min: 32, max: 32},
	// From gitleaks' rule set (config/gitleaks.toml): formats with a
	// prefix of their own, which need no keyword in front of them.
	{prefix: "SK", class: "twilio_api_key", body: isHex, min: 32, max: 32},
	{prefix: "AGE-SECRET-KEY-1", class: "age_secret_key", body: isBech32Upper, min: 58, max: 58},
	{prefix: "dp.pt.", class: "doppler_token", body: isAlnum, min: 40, max: 44},
	{prefix: "dp.st.", class: "doppler_token", body: isDopplerBody, min: 40, max: 80},
	{prefix: "dp.ct.", class: "doppler_token", body: isAlnum, min: 40, max: 44},
	{prefix: "dp.sa.", class: "doppler_token", body: isAlnum, min: 40, max: 44},
	{prefix: "hvs.", class: "vault_token", body: isB64URL, min: 90, max: 300},
	{prefix: "hvb.", class: "vault_token", body: isB64URL, min: 90, max: 300},
	{prefix: "hvr.", class: "vault_token", body: isB64URL, min: 90, max: 300},
	{prefix: "dapi", class: "databricks_token", body: isHex, min: 32, max: 32},
	{prefix: "lin_api_", class: "linear_key", body: isAlnum, min: 40, max: 40},
	{prefix: "ntn_", class: "notion_token", body: isAlnum, min: 46, max: 46},
	{prefix: "PMAK-", class: "postman_key", body: isHexDash, min: 59, max: 59},
	{prefix: "pul-", class: "pulumi_token", body: isHex, min: 40, max: 40},
	{prefix: "sntryu_", class: "sentry_token", body: isHex, min: 64, max: 64},
	{prefix: "sntrys_", class: "sentry_token", body: isBase64Char, min: 60, max: 500},
	{prefix: "NRAK-", class: "new_relic_key", body: isUpperDigit, min: 27, max: 27},
	{prefix: "NRII-", class: "new_relic_key", body: isAlnumDash, min: 32, max: 32},
	{prefix: "pscale_pw_", class: "planetscale_token", body: isB64URLDot, min: 32, max: 64},
	{prefix: "pscale_tkn_", class: "planetscale_token", body: isB64URLDot, min: 32, max: 64},
	{prefix: "pscale_oauth_", class: "planetscale_token", body: isB64URLDot, min: 32, max: 64},
	{prefix: "EAAA", class: "square_token", body: isB64URL, min: 22, max: 60},
	{prefix: "sq0atp-", class: "square_token", body: isB64URL, min: 22, max: 60},
	{prefix: "sq0csp-", class: "square_token", body: isB64URL, min: 40, max: 60},
	{prefix: "LTAI", class: "alibaba_key", body: isAlnum, min: 20, max: 20, check: digitOrMixedCase},
	{prefix: "pplx-", class: "perplexity_key", body: isAlnum, min: 48, max: 48},
	{prefix: "HRKU-AA", class: "heroku_key", body: isB64URL, min: 58, max: 58},
	{prefix: "glrt-", class: "gitlab_token", body: isB64URL, min: 20, max: 300},
	{prefix: "glcbt-", class: "gitlab_token", body: isB64URL, min: 20, max: 300},
	{prefix: "glft-", class: "gitlab_token", body: isB64URL, min: 20, max: 64},
	{prefix: "glimt-", class: "gitlab_token", body: isB64URL, min: 25, max: 64},
	{prefix: "gloas-", class: "gitlab_token", body: isB64URL, min: 64, max: 64},
	{prefix: "glsoat-", class: "gitlab_token", body: isB64URL, min: 20, max: 64},
	{prefix: "glffct-", class: "gitlab_token", body: isB64URL, min: 20, max: 64},
	{prefix: "glagent-", class: "gitlab_token", body: isB64URL, min: 50, max: 64},
	{prefix: "glsa_", class: "grafana_token", body: isB64URL, min: 41, max: 41},
	{prefix: "glc_", class: "grafana_token", body: isBase64Char, min: 32, max: 400},
	{prefix: "dt0c01.", class: "dynatrace_token", body: isB64URLDot, min: 89, max: 89},
	{prefix: "rdme_", class: "readme_token", body: isAlnum, min: 70, max: 70},
	{prefix: "rubygems_", class: "rubygems_token", body: isHex, min: 48, max: 48},
	{prefix: "pnu_", class: "prefect_token", body: isAlnum, min: 36, max: 36},
	{prefix: "fo1_", class: "flyio_token", body: isB64URL, min: 43, max: 43},
	{prefix: "AKCp", class: "artifactory_key", body: isAlnum, min: 69, max: 69},
	{prefix: "CLOJARS_", class: "clojars_token", body: isAlnum, min: 60, max: 60},
	{prefix: "xkeysib-", class: "sendinblue_key", body: isAlnumDash, min: 81, max: 81},
	{prefix: "shippo_live_", class: "shippo_token", body: isHex, min: 40, max: 40},
	{prefix: "shippo_test_", class: "shippo_token", body: isHex, min: 40, max: 40},
	{prefix: "duffel_live_", class: "duffel_token", body: isB64URL, min: 43, max: 43},
	{prefix: "duffel_test_", class: "duffel_token", body: isB64URL, min: 43, max: 43},
	{prefix: "EZAK", class: "easypost_key", body: isAlnum, min: 54, max: 54},
	{prefix: "EZTK", class: "easypost_key", body: isAlnum, min: 54, max: 54},
	{prefix: "FLWSECK-", class: "flutterwave_key", body: isAlnumDash, min: 34, max: 40},
	{prefix: "FLWSECK_TEST-", class: "flutterwave_key", body: isAlnumDash, min: 34, max: 40},
	{prefix: "tfp_", class: "typeform_token", body: isB64URLDot, min: 59, max: 59},
	{prefix: "ico-", class: "infracost_token", body: isAlnum, min: 32, max: 32},
	{prefix: "fio-u-", class: "frameio_token", body: isB64URL, min: 64, max: 64},
	{prefix: "sha256~", class: "openshift_token", body: isB64URL, min: 43, max: 43},
	{prefix: "api_org_", class: "huggingface_token", body: isLetter, min: 34, max: 34},
	{prefix: "ops_eyJ", class: "onepassword_token", body: isBase64Char, min: 250, max: 2000},
	{prefix: "ABSK", class: "aws_bedrock_key", body: isBase64Char, min: 109, max: 271},
	{prefix: "sk_prod_", class: "stripe_key", body: isAlnum, min: 16, max: 255},
	{prefix: "rk_prod_", class: "stripe_key", body: isAlnum, min: 16, max: 255},
}

// formatsByByte indexes formats by the first byte of their prefix.
var formatsByByte = func() (idx [256][]*format) {
	for i := range formats {
		f := &formats[i]
		idx[f.prefix[0]] = append(idx[f.prefix[0]], f)
	}
	return idx
}()

func isUpperDigit(c byte) bool { return isUpper(c) || isDigit(c) }
func isHexDash(c byte) bool    { return isHex(c) || c == '-' }
func isB64URLDot(c byte) bool  { return isB64URL(c) || c == '.' || c == '=' }
func isDopplerBody(c byte) bool {
	return isAlnum(c) || c == '.'
}

// isBech32Upper is bech32's data alphabet in upper case (age secret keys).
func isBech32Upper(c byte) bool {
	return c != 0 && strings.IndexByte("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", c) >= 0
}
func isAlnumDash(c byte) bool  { return isAlnum(c) || c == '-' }
func isPathChar(c byte) bool   { return isB64URL(c) || c == '/' }
func isBase64Char(c byte) bool { return isAlnum(c) || c == '+' || c == '/' || c == '=' }
func isSendGrid(c byte) bool   { return isB64URL(c) || c == '.' }

func hasDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			return true
		}
	}
	return false
}

func hasDot(s string) bool { return strings.IndexByte(s, '.') > 0 }

func digitAndLetter(s string) bool {
	d, l := false, false
	for i := 0; i < len(s); i++ {
		d = d || isDigit(s[i])
		l = l || isLetter(s[i])
	}
	return d && l
}

func digitOrMixedCase(s string) bool {
	var u, l bool
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case isDigit(c):
			return true
		case isUpper(c):
			u = true
		case isLower(c):
			l = true
		}
	}
	return u && l
}

// formats finds tokens of well-known formats, JWTs, Telegram bot tokens and
// "Bearer <token>", each starting at a word boundary. With cut, it tries
// no start closer to the end of the text than minFormatLen, where no
// format fits.
func (f *finder) formats(cut bool) {
	t := f.text
	stop := len(t)
	if cut {
		stop = len(t) - minFormatLen + 1
	}
	for i := 0; i < stop; i++ {
		c := t[i]
		if classes[c]&cStart == 0 || (i > 0 && isAlnum(t[i-1]) && !(isDigit(c) && strings.HasSuffix(t[:i], "/bot"))) {
			continue
		}
		if end := f.formatAt(i); end > i {
			i = end - 1
		}
	}
}

// minFormatLen is the shortest finding of formatAt, from where it starts:
// a prefix and its shortest body, a JWT (eyJ and 7, '.', 10, '.': 22),
// "Bearer " and 16 (23), a Telegram token (8 digits, ':', 35: 44).
var minFormatLen = func() int {
	n := 22
	for _, fm := range formats {
		n = min(n, len(fm.prefix)+fm.min)
	}
	return n
}()

// formatAt tries every detector at a word start; it returns the end of a
// finding, or i.
func (f *finder) formatAt(i int) int {
	t := f.text
	c := t[i]
	for _, fm := range formatsByByte[c] {
		if !strings.HasPrefix(t[i:], fm.prefix) {
			continue
		}
		bs := i + len(fm.prefix)
		j := bs
		for j < len(t) && j-bs <= fm.max && fm.body(t[j]) {
			j++
		}
		n := j - bs
		if n < fm.min || n > fm.max || (j < len(t) && isAlnum(t[j])) || (fm.check != nil && !fm.check(t[bs:j])) {
			continue
		}
		if fm.keepPrefix {
			f.add(bs, j, fm.class)
		} else {
			f.add(i, j, fm.class)
		}
		return j
	}
	switch {
	case c == 'e':
		if end := jwtAt(t, i); end > 0 {
			f.add(i, end, "jwt")
			return end
		}
	case c == 'B' || c == 'b':
		if s, e := bearerAt(t, i); e > 0 {
			f.add(s, e, "authorization")
			return e
		}
	case isDigit(c):
		if end := telegramAt(t, i); end > 0 {
			f.add(i, end, "telegram_token")
			return end
		}
	}
	return i
}

// jwtAt matches eyJ<header>.eyJ<payload>.<signature>.
func jwtAt(t string, i int) int {
	if !strings.HasPrefix(t[i:], "eyJ") {
		return 0
	}
	j := i
	for part := 0; part < 3; part++ {
		s := j
		for j < len(t) && isB64URL(t[j]) {
			j++
		}
		switch part {
		case 0:
			if j-s < 10 || j >= len(t) || t[j] != '.' {
				return 0
			}
			j++
		case 1:
			if j-s < 10 || !strings.HasPrefix(t[s:], "eyJ") {
				return 0
			}
			if j >= len(t) || t[j] != '.' {
				return 0
			}
			j++
		}
	}
	return j
}

// bearerAt matches "Bearer <token>" (any case): the token is returned.
func bearerAt(t string, i int) (int, int) {
	if len(t)-i < 8 || !strings.EqualFold(t[i:i+6], "bearer") || t[i+6] != ' ' {
		return 0, 0
	}
	s := i + 7
	for s < len(t) && t[s] == ' ' {
		s++
	}
	j := s
	lowerOnly := true
	for j < len(t) && (isB64URL(t[j]) || strings.IndexByte(".~+/=", t[j]) >= 0) {
		if !isLower(t[j]) {
			lowerOnly = false
		}
		j++
	}
	if j-s < 16 || lowerOnly || (j < len(t) && isAlnum(t[j])) {
		return 0, 0
	}
	return s, j
}

// telegramAt matches a Telegram bot token: 8-10 digits, ':', 35 characters.
func telegramAt(t string, i int) int {
	j := i
	for j < len(t) && isDigit(t[j]) {
		j++
	}
	if n := j - i; n < 8 || n > 10 || j+1 >= len(t) || t[j] != ':' {
		return 0
	}
	s := j + 1
	j = s
	for j < len(t) && isB64URL(t[j]) {
		j++
	}
	if j-s != 35 || !strings.HasPrefix(t[s:], "AA") {
		return 0
	}
	return j
}
