package hooks

import (
	"regexp"
	"strings"
)

// Structure-aware detectors: credentials recognised by where they stand in
// a command line or a call, not by their own shape.
var (
	// curl -u user:pass, --user user:pass, --user=user:pass (also wget,
	// http, git credential helpers): the part after the first ':'.
	userFlagRE = regexp.MustCompile(`(?:^|[\s'"])(?:-u|--user|--proxy-user|-U)(?:=|[ \t]+)['"]?([^\s:'"]{1,256}):([^\s'"]{1,512})`)
	// mysql -pSECRET (no space: the password is attached to -p).
	mysqlRE = regexp.MustCompile(`\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^\n]*?\s-p([^\s'"]{1,512})`)
	// sshpass -p SECRET.
	sshpassRE = regexp.MustCompile(`\bsshpass\s+-p\s*['"]?([^\s'"]{1,512})`)
	// A call whose first argument names a secret and whose second is a
	// literal default: getenv("API_TOKEN", "value").
	defaultArgRE = regexp.MustCompile(`\(\s*["']([A-Za-z0-9_.\-]{2,64})["']\s*,\s*["']([^"'\n]{4,512})["']\s*\)`)
	// Twilio-style pairs: an account id (AC + 32 hex) with a 32-hex secret
	// near it.
	twilioSIDRE = regexp.MustCompile(`\bAC[0-9a-f]{32}\b`)
	hex32RE     = regexp.MustCompile(`\b[0-9a-f]{32}\b`)
)

// structures runs the structure-aware detectors.
func (f *finder) structures() {
	t := f.text
	if strings.Contains(t, "-u") || strings.Contains(t, "-U") || strings.Contains(t, "--user") || strings.Contains(t, "--proxy-user") {
		for _, m := range userFlagRE.FindAllStringSubmatchIndex(t, -1) {
			if v := t[m[4]:m[5]]; !placeholder(v) {
				f.add(m[4], m[5], "cli_credentials")
			}
		}
	}
	if strings.Contains(t, "-p") {
		for _, m := range mysqlRE.FindAllStringSubmatchIndex(t, -1) {
			if v := t[m[2]:m[3]]; len(v) >= 4 && !placeholder(v) {
				f.add(m[2], m[3], "cli_credentials")
			}
		}
		for _, m := range sshpassRE.FindAllStringSubmatchIndex(t, -1) {
			if v := t[m[2]:m[3]]; !placeholder(v) {
				f.add(m[2], m[3], "cli_credentials")
			}
		}
	}
	if strings.IndexByte(t, '(') >= 0 {
		for _, m := range defaultArgRE.FindAllStringSubmatchIndex(t, -1) {
			if keyKindOf(t[m[2]:m[3]]) == kindNone {
				continue
			}
			if v := t[m[4]:m[5]]; plausibleValue(v, true, kindToken) {
				f.add(m[4], m[5], "assignment")
			}
		}
	}
	if strings.Contains(t, "AC") {
		for _, sid := range twilioSIDRE.FindAllStringIndex(t, -1) {
			lo, hi := max(0, sid[0]-200), min(len(t), sid[1]+200)
			for _, m := range hex32RE.FindAllStringIndex(t[lo:hi], -1) {
				s, e := lo+m[0], lo+m[1]
				if s == sid[0]+2 {
					continue // the id's own digits
				}
				f.add(s, e, "paired_secret")
			}
		}
	}
}
