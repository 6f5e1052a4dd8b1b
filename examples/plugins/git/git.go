package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/sdk"
)

// git runs read-only git commands in one repository.
type git struct {
	repo      string
	maxOutput int
	bin       string // empty: looked up on first use
}

// callTimeout bounds one git command, whatever the host allows.
const callTimeout = 30 * time.Second

// The argument schemas. Patterns keep option-like values out: a path or a
// revision never starts with "-", and paths are passed after "--".
const (
	pathProp = `"path": {"type": "string", "description": "Limit to this file or directory, relative to the repository root.", "maxLength": 4096, "pattern": "^[^-\\x00][^\\x00]*$"}`
	revProp  = `{"type": "string", "maxLength": 100, "pattern": "^[A-Za-z0-9_][A-Za-z0-9_./~^@{}-]*$"`

	statusSchema = `{"type": "object", "additionalProperties": false, "properties": {` + pathProp + `}}`
	diffSchema   = `{"type": "object", "additionalProperties": false, "properties": {` + pathProp + `,
		"staged": {"type": "boolean", "description": "Show staged changes (the index against HEAD) instead of unstaged ones."},
		"base": ` + revProp + `, "description": "Compare the working tree (or the index, with staged) against this revision, e.g. HEAD~1."},
		"stat": {"type": "boolean", "description": "Show a summary of changed files instead of the patch."},
		"context": {"type": "integer", "minimum": 0, "maximum": 20, "description": "Lines of context around changes (default 3)."}}}`
	logSchema = `{"type": "object", "additionalProperties": false, "properties": {` + pathProp + `,
		"rev": ` + revProp + `, "description": "Start from this revision or range, e.g. main or HEAD~5..HEAD (default HEAD)."},
		"max_count": {"type": "integer", "minimum": 1, "maximum": 100, "description": "How many commits (default 10)."}}}`
)

type statusArgs struct {
	Path string `json:"path"`
}

type diffArgs struct {
	Path    string `json:"path"`
	Staged  bool   `json:"staged"`
	Base    string `json:"base"`
	Stat    bool   `json:"stat"`
	Context *int   `json:"context"`
}

type logArgs struct {
	Path     string `json:"path"`
	Rev      string `json:"rev"`
	MaxCount int    `json:"max_count"`
}

func (g *git) tools() []*sdk.Tool {
	return []*sdk.Tool{
		sdk.Text(sdk.Spec{
			Name:        "git_status",
			Description: "Show the repository's branch and which files are modified, staged or untracked (git status --short --branch).",
			Schema:      statusSchema, Tier: sdk.ReadOnly, Tags: []string{"git", "read"},
		}, g.status),
		sdk.Text(sdk.Spec{
			Name:        "git_diff",
			Description: "Show changes as a patch: unstaged by default, staged with staged=true, or against a revision with base. stat=true gives a per-file summary.",
			Schema:      diffSchema, Tier: sdk.ReadOnly, Tags: []string{"git", "read"},
		}, g.diff),
		sdk.Text(sdk.Spec{
			Name:        "git_log",
			Description: "List recent commits (hash, date, author, subject), optionally for one path or from a revision.",
			Schema:      logSchema, Tier: sdk.ReadOnly, Tags: []string{"git", "read"},
		}, g.log),
	}
}

func (g *git) status(ctx context.Context, a statusArgs) (string, error) {
	args := []string{"status", "--short", "--branch", "--untracked-files=normal", "--ignore-submodules=all"}
	out, err := g.run(ctx, args, a.Path)
	if err != nil {
		return "", err
	}
	if strings.Count(out, "\n") <= 1 {
		out += "(working tree clean)\n"
	}
	return out, nil
}

func (g *git) diff(ctx context.Context, a diffArgs) (string, error) {
	args := []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=all"}
	if a.Staged {
		args = append(args, "--cached")
	}
	if a.Stat {
		args = append(args, "--stat")
	}
	if a.Context != nil {
		args = append(args, fmt.Sprintf("-U%d", *a.Context))
	}
	if a.Base != "" {
		if err := checkRev(a.Base); err != nil {
			return "", err
		}
		args = append(args, a.Base)
	}
	out, err := g.run(ctx, args, a.Path)
	if err != nil {
		return "", err
	}
	if out == "" {
		return "(no differences)\n", nil
	}
	return out, nil
}

func (g *git) log(ctx context.Context, a logArgs) (string, error) {
	n := a.MaxCount
	if n == 0 {
		n = 10
	}
	args := []string{"log", "--no-color", "--date=short", "--format=%h %ad %an: %s", fmt.Sprintf("--max-count=%d", n)}
	if a.Rev != "" {
		if err := checkRev(a.Rev); err != nil {
			return "", err
		}
		args = append(args, a.Rev)
	}
	out, err := g.run(ctx, args, a.Path)
	if err != nil {
		return "", err
	}
	if out == "" {
		return "(no commits)\n", nil
	}
	return out, nil
}

// checkRev refuses revisions that git could read as an option. The schema
// already does; this guards the handler when it is called directly.
func checkRev(rev string) error {
	if strings.HasPrefix(rev, "-") || strings.ContainsAny(rev, " \t\n\x00:") {
		return sdk.Errorf(sdk.CodeInvalidArgs, "revision %q is not a plain revision such as HEAD~1 or main", rev)
	}
	return nil
}

// checkPath refuses pathspecs outside the repository.
func checkPath(p string) error {
	clean := path.Clean(p)
	switch {
	case p == "":
		return nil
	case strings.HasPrefix(p, "/"):
		return sdk.Errorf(sdk.CodeInvalidArgs, "path %q must be relative to the repository root", p)
	case clean == ".." || strings.HasPrefix(clean, "../"):
		return sdk.Errorf(sdk.CodeInvalidArgs, "path %q is outside the repository", p)
	case strings.HasPrefix(p, "-") || strings.ContainsRune(p, 0):
		return sdk.Errorf(sdk.CodeInvalidArgs, "path %q is not a file or directory name", p)
	case strings.HasPrefix(p, ":"):
		return sdk.Errorf(sdk.CodeInvalidArgs, "path %q: pathspec magic is not allowed", p)
	}
	return nil
}

// safetyConfig turns off what a repository's own configuration could make
// git run: fsmonitor hooks, hooks, pagers, external diff drivers. Every
// other program a repository names (filters, textconv, diff and merge
// drivers, credential helpers, ssh commands...) is blanked by
// hardenedEnv, key by key. Submodules are not entered at all (status and
// diff also pass --ignore-submodules=all): a submodule has its own
// configuration (.git/modules/NAME/config), which hardenedEnv does not
// read, so git must never run a command inside one.
var safetyConfig = []string{
	"-c", "submodule.recurse=false",
	"-c", "diff.ignoreSubmodules=all",
	"-c", "status.submoduleSummary=false",
	"-c", "core.fsmonitor=false",
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.pager=cat",
	"-c", "diff.external=",
	"-c", "color.ui=false",
	"-c", "log.showSignature=false",
	"-c", "core.sshCommand=",
	"-c", "credential.helper=",
	"-c", "core.askPass=",
	"-c", "gpg.program=",
}

// programKeySuffixes end every configuration key whose value git may run
// as a program (or whose value is a program's configuration).
var programKeySuffixes = []string{
	".clean", ".smudge", ".process", ".textconv", ".command", ".driver", ".program",
	".helper", ".sshcommand", ".askpass", ".editor", ".pager", ".fsmonitor", ".hookspath",
	".hook", ".proxy", ".gitproxy", ".alternaterefscommand", ".packobjectshook", ".cmd", ".tool",
}

// hardenedEnv is gitEnv plus, for every key of the repository's
// configuration (includes followed) that names a program, an override to
// the empty value. The overrides go through GIT_CONFIG_COUNT/KEY/VALUE,
// which take the key verbatim: a "-c key=" argument would be misparsed for
// a subsection holding "=". Reading the configuration runs nothing.
func (g *git) hardenedEnv(ctx context.Context, bin string) ([]string, error) {
	env := gitEnv()
	cmd := sdk.Command(ctx, bin, "--no-pager", "-C", g.repo, "config", "--list", "--includes", "--name-only", "-z")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		// No repository (or no configuration): nothing to neutralise.
		return env, nil
	}
	n := 0
	for _, key := range strings.Split(string(out), "\x00") {
		key = strings.TrimSpace(key)
		lower := strings.ToLower(key)
		hit := false
		for _, suf := range programKeySuffixes {
			hit = hit || strings.HasSuffix(lower, suf)
		}
		if !hit {
			continue
		}
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", n, key), fmt.Sprintf("GIT_CONFIG_VALUE_%d=", n))
		n++
	}
	return append(env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", n)), nil
}

// run runs git with args in the repository, limited to pathspec if set,
// and returns its output capped at maxOutput.
func (g *git) run(ctx context.Context, args []string, pathspec string) (string, error) {
	if err := checkPath(pathspec); err != nil {
		return "", err
	}
	bin, err := g.binary()
	if err != nil {
		return "", err
	}
	full := append([]string{"--no-pager", "-C", g.repo}, safetyConfig...)
	full = append(full, args...)
	full = append(full, "--")
	if pathspec != "" {
		full = append(full, pathspec)
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	// A child of the call's span when the kernel traces the call: the
	// run's trace shows how long git itself took.
	ctx, span := sdk.StartSpan(ctx, "git "+args[0])
	defer span.End()
	env, err := g.hardenedEnv(ctx, bin)
	if err != nil {
		return "", err
	}
	cmd := sdk.Command(ctx, bin, full...)
	cmd.Env = env
	out := &capBuffer{max: g.maxOutput}
	var stderr capBuffer
	stderr.max = 4 << 10
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", sdk.Errorf(sdk.CodeTimeout, "git %s did not finish within %s", args[0], callTimeout)
		}
		return "", gitError(args[0], strings.TrimSpace(stderr.String()), err)
	}
	s := out.String()
	if out.total > g.maxOutput {
		// The cut may have split a character: drop its bytes.
		s = strings.ToValidUTF8(s, "") + sdk.TruncationMarker(out.total, g.maxOutput)
	}
	return s, nil
}

func gitError(sub, stderr string, err error) error {
	msg := stderr
	if msg == "" {
		msg = err.Error()
	}
	switch {
	case strings.Contains(stderr, "not a git repository"):
		return sdk.Errorf(sdk.CodeNotFound, "git %s: %s", sub, msg)
	case strings.Contains(stderr, "unknown revision"), strings.Contains(stderr, "bad revision"),
		strings.Contains(stderr, "ambiguous argument"), strings.Contains(stderr, "outside repository"):
		return sdk.Errorf(sdk.CodeInvalidArgs, "git %s: %s", sub, msg)
	case strings.Contains(stderr, "does not have any commits yet"):
		return sdk.Errorf(sdk.CodeNotFound, "git %s: %s", sub, msg)
	}
	return fmt.Errorf("git %s: %s", sub, msg)
}

// gitEnv is the environment git runs with: no user or system
// configuration, no prompts, no optional locks (status stays read-only).
func gitEnv() []string {
	env := []string{
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_PAGER=cat",
		"LC_ALL=C",
	}
	if p := os.Getenv("PATH"); p != "" {
		env = append(env, "PATH="+p)
	}
	if h := os.Getenv("HOME"); h != "" {
		env = append(env, "HOME="+h)
	}
	return env
}

// binary returns the git binary to run.
func (g *git) binary() (string, error) {
	if g.bin != "" {
		return g.bin, nil
	}
	if p, err := exec.LookPath("git"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/git", "/usr/local/bin/git", "/bin/git", "/opt/homebrew/bin/git"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", sdk.Errorf(sdk.CodeUnavailable, "git is not installed (looked in $PATH, /usr/bin, /usr/local/bin, /bin); pass -git PATH in the plugin's args")
}

// capBuffer keeps the first max bytes written and counts the rest.
type capBuffer struct {
	max   int
	total int
	buf   bytes.Buffer
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.total += len(p)
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (c *capBuffer) String() string { return c.buf.String() }
