package main

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/agentkernel/agentkernel/hooks"
)

// Credentials in an imported server's arguments and URL: MCP clients
// start servers with `--token ghp_…` or `--api-key=…` in args, and reach
// HTTP servers at `…?api_key=…`. `kernel mcp import` writes none of them
// into kernel.yaml: each becomes a ${env:NAME} reference (the kernel
// substitutes its own environment variable NAME when it starts the server
// or requests the URL, and scrubs the value from everything it prints or
// stores), with a note telling the operator what to export.

// secretFlag matches an option whose value is a credential: --token,
// --api-key, --github-token, --password, --auth, --key (not --key-file,
// --auth-type or --token-url: the last word decides).
var secretFlag = regexp.MustCompile(`(?i)^--?(?:[a-z0-9]+[-_])*(?:token|secret|password|passwd|pass|pwd|apikey|api[-_]key|access[-_]key|secret[-_]key|private[-_]key|auth|credentials?|cookie|key)$`)

// secretParam matches a URL query parameter that carries a credential:
// api_key, apiKey, access_token, token, key, sig, password, ...
// (camelCase split first: accessToken is access_Token).
var secretParam = regexp.MustCompile(`(?i)^(?:[a-z0-9]+[-_])*(?:token|secret|password|passwd|pass|pwd|apikey|api[-_]key|access[-_]key|secret[-_]key|private[-_]key|auth|credentials?|key|sig|signature)$`)

// words splits camelCase with '_': apiKey is api_Key, so the patterns see
// its last word.
func words(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if i > 0 && s[i] >= 'A' && s[i] <= 'Z' && s[i-1] >= 'a' && s[i-1] <= 'z' {
			b.WriteByte('_')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// secretEnv names the environment variable a credential of the server
// moves to, unique within the server: MCP_<SERVER>_<WHAT>.
func (e *importedServer) secretEnv(what string) string {
	base := envVarName("MCP_" + e.Name + "_" + words(strings.Trim(what, "-_")))
	name := base
	for i := 2; e.usedEnv[name]; i++ {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	if e.usedEnv == nil {
		e.usedEnv = map[string]bool{}
	}
	e.usedEnv[name] = true
	return name
}

// movedSecret is a credential found in the file's value: where it was.
func (e *importedServer) movedSecret(where, env string) string {
	e.notes = append(e.notes, fmt.Sprintf("%s held a credential in the file, not copied: export %s with its value (the entry says ${env:%s})", where, env, env))
	return "${env:" + env + "}"
}

// plainValue reports whether v is no credential to move: empty, already a
// reference, or a path that exists here.
func plainValue(v string) bool {
	if v == "" || strings.HasPrefix(v, "${") || strings.HasPrefix(v, "{workspace}") {
		return true
	}
	if strings.HasPrefix(v, "/") || strings.HasPrefix(v, "~/") || strings.HasPrefix(v, "./") {
		if _, err := os.Stat(expandHome(v)); err == nil {
			return true
		}
	}
	return false
}

func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return home + "/" + rest
		}
	}
	return p
}

// secretArgs returns the arguments (argv without the program) with every
// credential replaced by a ${env:NAME} reference: the value of a
// credential option (--token VALUE, --api-key=VALUE), a credential in a
// URL argument's query, and anything else the credential scrubber
// recognises (a ghp_… token passed on its own).
func (e *importedServer) secretArgs(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if flag, val, ok := strings.Cut(a, "="); ok && strings.HasPrefix(flag, "-") && secretFlag.MatchString(words(flag)) {
			if !plainValue(val) {
				out[i] = flag + "=" + e.movedSecret("argument "+flag, e.secretEnv(flag))
			}
			continue
		}
		if strings.HasPrefix(a, "-") && secretFlag.MatchString(words(a)) && i+1 < len(out) && !strings.HasPrefix(out[i+1], "-") {
			if !plainValue(out[i+1]) {
				out[i+1] = e.movedSecret("the value of "+a, e.secretEnv(a))
			}
			i++
			continue
		}
		if u, ok := e.secretURL(a, fmt.Sprintf("argument %d's URL", i+1)); ok {
			out[i] = u
			continue
		}
		out[i] = e.scrubbedArg(a, i+1)
	}
	return out
}

// scrubbedArg replaces what the credential scrubber finds in a (the n-th
// argument) with references.
func (e *importedServer) scrubbedArg(a string, n int) string {
	if plainValue(a) {
		return a
	}
	// A path, a file name or a version is often random-looking (a
	// temporary directory, a hash): only a credential's own format, not
	// its randomness alone, marks a secret there.
	pathLike := strings.ContainsAny(a, "/.")
	var b strings.Builder
	last := 0
	for _, f := range defaultScrubber.Find(a) {
		if pathLike && f.Class == hooks.ClassHighEntropy {
			continue
		}
		b.WriteString(a[last:f.Start])
		b.WriteString(e.movedSecret(fmt.Sprintf("argument %d (a %s)", n, strings.ReplaceAll(f.Class, "_", " ")), e.secretEnv(f.Class)))
		last = f.End
	}
	b.WriteString(a[last:])
	return b.String()
}

// secretURL returns u with every credential in it replaced by a reference:
// the value of a query parameter named like one (api_key, token, sig, ...)
// or that the scrubber recognises, and a password in the user
// information. ok is false when u is not an http(s) URL with any of them;
// the rest of u is kept byte for byte.
func (e *importedServer) secretURL(u, where string) (string, bool) {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return u, false
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return u, false
	}
	changed := false
	if pw, ok := parsed.User.Password(); ok && pw != "" && !plainValue(pw) {
		scheme, rest, _ := strings.Cut(u, "://")
		if at := strings.Index(rest, "@"); at >= 0 {
			if colon := strings.Index(rest[:at], ":"); colon >= 0 {
				rest = rest[:colon+1] + e.movedSecret(where+"'s password", e.secretEnv("PASSWORD")) + rest[at:]
				u, changed = scheme+"://"+rest, true
			}
		}
	}
	head, query, ok := strings.Cut(u, "?")
	if !ok {
		return u, changed
	}
	frag := ""
	if q, f, ok := strings.Cut(query, "#"); ok {
		query, frag = q, "#"+f
	}
	params := strings.Split(query, "&")
	for i, p := range params {
		k, v, ok := strings.Cut(p, "=")
		if !ok || plainValue(v) {
			continue
		}
		name, _ := url.QueryUnescape(k)
		val, _ := url.QueryUnescape(v)
		if secretParam.MatchString(words(name)) || len(defaultScrubber.Find(val)) > 0 {
			params[i] = k + "=" + e.movedSecret(fmt.Sprintf("%s's query parameter %s", where, name), e.secretEnv(name))
			changed = true
		}
	}
	return head + "?" + strings.Join(params, "&") + frag, changed
}
