package hooks

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// The markers that replace a credential.
const (
	Redacted            = "[REDACTED]"
	RedactedHighEntropy = "[REDACTED:high-entropy]"
)

// ClassHighEntropy is the Finding class of a random-looking token found by
// entropy alone; every other class comes from a keyword or a known format.
const ClassHighEntropy = "high_entropy"

// Finding is one credential the Scrubber found: text[Start:End] is what it
// replaces, and Class says which detector found it ("private_key",
// "aws_access_key", "github_token", "assignment", "authorization",
// "url_credentials", "jwt", ..., "custom" for an extra pattern, or
// "high_entropy").
type Finding struct {
	Start, End int
	Class      string
}

// Scrubber finds credentials in text and replaces them with Redacted (or
// RedactedHighEntropy). Before any detector, the values of its
// KnownSecrets (the keys the process holds) are redacted wherever they
// occur; allow patterns and placeholder shapes never keep one. Its
// detectors, in order:
//
//  1. private key blocks (-----BEGIN ... PRIVATE KEY----- to the matching
//     END line, or to the end of the text when the END line is missing);
//  2. passwords in URLs (scheme://user:password@host);
//  3. well-known token formats: AWS access key ids, GitHub, GitLab, Slack,
//     OpenAI-style sk- keys, agentkernel API keys (aks_), Stripe, Google
//     API keys, JWTs, npm, Hugging
//     Face, SendGrid, Telegram, DigitalOcean, Shopify, PyPI, Slack and
//     Discord webhook URLs, and "Bearer <token>";
//  4. keyword assignments: a key ending in password, secret, token, api_key,
//     access_key, private_key, credentials, auth, authorization, ... then
//     ':', '=', ':=', '=>' or an XML tag or a command-line flag, then a
//     value; placeholders, variables, code references and prose are left;
//  5. high entropy: a token of [A-Za-z0-9+/_-] of 24 to 512 characters,
//     not pure hex (hashes, UUIDs), of mixed character classes, with a
//     Shannon entropy of at least 3.8 bits per character, that does not
//     read as words (identifiers, paths) or as a known public format
//     (certificates, SSH public keys, go.sum and SRI hashes, crypt hashes,
//     ULIDs, data: URIs, wrapped base64 blocks);
//  6. the configured extra patterns;
//  7. structure: the password of "curl -u user:pass" and --user, "mysql
//     -pPASS", "sshpass -p PASS", a literal default of a secret-named
//     lookup (getenv("API_TOKEN", "...")), and a 32-hex secret beside a
//     Twilio-style account id.
//
// Placeholders are recognised by shape, not by a leading '$': mostly one
// filler character (X, x, 0, *), EXAMPLE, <...>, ${...}, {{...}}, $(...),
// $NAME, __name__, "your-..."; such findings are dropped whatever found
// them. Base64 tokens that decode to a known file signature or to text are
// not reported by the entropy detector.
//
// A Scrubber is immutable and safe for concurrent use.
type Scrubber struct {
	entropy bool
	extra   []*regexp.Regexp
	allow   []*regexp.Regexp
	known   *KnownSecrets
	// knownOnly: only the known secrets are redacted (a chain whose
	// scrubber is disabled for tool results).
	knownOnly bool
}

// NewScrubber compiles a scrubber. Enabled is not consulted: a Scrubber
// always scrubs. A bad pattern is a *ConfigError naming it.
func NewScrubber(cfg ScrubberConfig) (*Scrubber, error) {
	s := &Scrubber{entropy: cfg.HighEntropy == nil || *cfg.HighEntropy, known: cfg.Known}
	var errs []error
	for i, p := range cfg.ExtraPatterns {
		re, err := compilePattern(p)
		if err != nil {
			errs = append(errs, hookError(NameScrubber, fmt.Sprintf("scrubber.extra_patterns[%d]", i), err))
			continue
		}
		s.extra = append(s.extra, re)
	}
	for i, p := range cfg.AllowPatterns {
		re, err := compilePattern(p)
		if err != nil {
			errs = append(errs, hookError(NameScrubber, fmt.Sprintf("scrubber.allow_patterns[%d]", i), err))
			continue
		}
		s.allow = append(s.allow, re)
	}
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	return s, nil
}

func compilePattern(p string) (*regexp.Regexp, error) {
	if p == "" {
		return nil, fmt.Errorf("empty pattern")
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression: %w", err)
	}
	if re.MatchString("") {
		return nil, fmt.Errorf("pattern %q matches the empty string", p)
	}
	return re, nil
}

// onlyKnown returns a scrubber that redacts only s's known secrets.
func (s *Scrubber) onlyKnown() *Scrubber { return &Scrubber{known: s.known, knownOnly: true} }

// Find returns the credentials in text, sorted and not overlapping: the
// known secrets, and what the detectors find.
func (s *Scrubber) Find(text string) []Finding {
	known := s.known.find(text)
	if s.knownOnly || len(known) == 0 {
		if s.knownOnly {
			return known
		}
		return s.detect(text)
	}
	return merge(append(known, s.detect(text)...))
}

// detect runs the detectors.
func (s *Scrubber) detect(text string) []Finding { return s.detectShaped(text, shapeOf(text)) }

// detectShaped runs the detectors sh lets through (allShape: every one).
func (s *Scrubber) detectShaped(text string, sh textShape) []Finding {
	f := finder{text: text}
	f.run(sh, s.entropy)
	for _, re := range s.extra {
		for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
			start, end := m[0], m[1]
			if len(m) >= 4 && m[2] >= 0 {
				start, end = m[2], m[3] // the first group is the secret
			}
			if end > start {
				f.add(start, end, "custom")
			}
		}
	}
	if len(f.out) == 0 {
		return nil
	}
	out := slices.DeleteFunc(f.out, func(x Finding) bool {
		return x.Class != "private_key" && placeholderShape(text[x.Start:x.End])
	})
	if len(out) == 0 {
		return nil
	}
	slices.SortFunc(out, func(a, b Finding) int { return a.Start - b.Start })
	out = dropOverMarkers(text, out)
	if len(s.allow) > 0 {
		var allowed [][]int
		for _, re := range s.allow {
			allowed = append(allowed, re.FindAllStringIndex(text, -1)...)
		}
		slices.SortFunc(allowed, func(a, b []int) int { return a[0] - b[0] })
		// Sweep: a finding is dropped when the allowed spans that start at
		// or before it reach past its end.
		j, reach := 0, -1
		out = slices.DeleteFunc(out, func(x Finding) bool {
			for j < len(allowed) && allowed[j][0] <= x.Start {
				reach = max(reach, allowed[j][1])
				j++
			}
			return reach >= x.End
		})
	}
	return merge(out)
}

// dropOverMarkers drops findings (sorted by start) that overlap a marker
// already in the text, so that scrubbed text scrubs to itself.
func dropOverMarkers(text string, found []Finding) []Finding {
	if !strings.Contains(text, "[REDACTED") {
		return found
	}
	var marks [][2]int
	for i := 0; ; {
		k := strings.Index(text[i:], "[REDACTED")
		if k < 0 {
			break
		}
		s := i + k
		e := s + len(Redacted)
		if strings.HasPrefix(text[s:], RedactedHighEntropy) {
			e = s + len(RedactedHighEntropy)
		} else if !strings.HasPrefix(text[s:], Redacted) {
			e = s + len("[REDACTED")
		}
		marks = append(marks, [2]int{s, e})
		i = e
	}
	j := 0
	return slices.DeleteFunc(found, func(x Finding) bool {
		for j < len(marks) && marks[j][1] <= x.Start {
			j++
		}
		return j < len(marks) && marks[j][0] < x.End
	})
}

// merge sorts findings and joins the overlapping ones; a keyword or format
// class wins over high_entropy.
func merge(in []Finding) []Finding {
	if len(in) == 0 {
		return nil
	}
	slices.SortFunc(in, func(a, b Finding) int {
		if a.Start != b.Start {
			return a.Start - b.Start
		}
		return b.End - a.End
	})
	out := in[:1]
	for _, x := range in[1:] {
		last := &out[len(out)-1]
		if x.Start >= last.End {
			out = append(out, x)
			continue
		}
		if x.End > last.End {
			last.End = x.End
		}
		if last.Class == ClassHighEntropy && x.Class != ClassHighEntropy || x.Class == ClassKnownSecret {
			last.Class = x.Class
		}
	}
	return out
}

// Scrub returns text with every finding replaced by its marker, and the
// number of findings. Text without findings is returned as is. A
// replacement can change how the text around it reads (a token that was
// part of a longer one stands alone), so Scrub scans the lines around its
// replacements again until nothing more is found: scrubbed text scrubs to
// itself.
func (s *Scrubber) Scrub(text string) (string, int) { return s.scrub(text, false) }

// ScrubLines is Scrub that keeps every line where it was: a credential that
// spans lines (a private key block) is replaced by a marker followed by its
// line breaks, so line N of the result is what is left of line N of text.
func (s *Scrubber) ScrubLines(text string) string {
	out, _ := s.scrub(text, true)
	return out
}

func (s *Scrubber) scrub(text string, keepLines bool) (string, int) {
	// The known secrets go first: what the detectors see next no longer
	// holds them, so nothing they decide can keep one.
	known := 0
	if kf := s.known.find(text); len(kf) > 0 {
		text, _ = replace(text, kf, keepLines)
		known = len(kf)
	}
	if s.knownOnly {
		return text, known
	}
	found := s.detect(text)
	if len(found) == 0 {
		return text, known
	}
	out, marks := replace(text, found, keepLines)
	total := len(found)
	for pass := 1; pass < maxPasses; pass++ {
		// The lines next to a replacement may read differently now. Scan
		// them with two lines of context on each side (what the detectors
		// look at), and keep what is found on them.
		inner := lineWindows(out, marks, 1)
		var more []Finding
		for _, w := range lineWindows(out, marks, 2) {
			for _, x := range s.detect(out[w[0]:w[1]]) {
				x.Start, x.End = x.Start+w[0], x.End+w[0]
				if overlapsAny(x, inner) {
					more = append(more, x)
				}
			}
		}
		if len(more) == 0 {
			break
		}
		out, marks = replace(out, more, keepLines)
		total += len(more)
	}
	return out, total + known
}

// maxPasses bounds Scrub's rescans; two are enough in practice.
const maxPasses = 4

// replace builds text with found (sorted, disjoint) replaced by markers,
// and returns where the markers are. keepLines puts the line breaks of
// each replaced span after its marker.
func replace(text string, found []Finding, keepLines bool) (string, [][2]int) {
	var b strings.Builder
	b.Grow(len(text))
	marks := make([][2]int, 0, len(found))
	at := 0
	for _, x := range found {
		b.WriteString(text[at:x.Start])
		m := Redacted
		if x.Class == ClassHighEntropy {
			m = RedactedHighEntropy
		}
		marks = append(marks, [2]int{b.Len(), b.Len() + len(m)})
		b.WriteString(m)
		if keepLines {
			b.WriteString(strings.Repeat("\n", strings.Count(text[x.Start:x.End], "\n")))
		}
		at = x.End
	}
	b.WriteString(text[at:])
	return b.String(), marks
}

// lineWindows returns, sorted and disjoint, the spans from n lines before
// each mark's line to n lines after it. Marks are sorted; a mark inside the
// window so far adds nothing, so each line is scanned a bounded number of
// times.
func lineWindows(text string, marks [][2]int, n int) [][2]int {
	var out [][2]int
	for _, m := range marks {
		if k := len(out); k > 0 && m[1] <= out[k-1][1] {
			continue
		}
		s, e := lineStart(text, m[0]), lineEnd(text, m[1])
		for range n {
			if s > 0 {
				s = lineStart(text, s-1)
			}
			if e < len(text) {
				e = lineEnd(text, e+1)
			}
		}
		if k := len(out); k > 0 && s <= out[k-1][1] {
			out[k-1][1] = max(out[k-1][1], e)
			continue
		}
		out = append(out, [2]int{s, e})
	}
	return out
}

// overlapsAny reports whether x overlaps one of spans (sorted, disjoint).
func overlapsAny(x Finding, spans [][2]int) bool {
	j := sort.Search(len(spans), func(j int) bool { return spans[j][1] > x.Start })
	return j < len(spans) && spans[j][0] < x.End
}

func lineStart(t string, i int) int { return strings.LastIndexByte(t[:i], '\n') + 1 }

func lineEnd(t string, i int) int {
	if k := strings.IndexByte(t[i:], '\n'); k >= 0 {
		return i + k
	}
	return len(t)
}
