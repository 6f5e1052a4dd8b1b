package hostpath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// ErrUnresolvedScript is matched by the error of a command line that runs
// a shell script (sh -c '...') the kernel cannot resolve statically: one
// that expands a variable, substitutes a command, globs, reads a here
// document or evaluates a string, so that what it runs is known only when
// it runs.
var ErrUnresolvedScript = errors.New("runs a shell script whose files cannot be known before it runs")

// ScriptError says which script could not be resolved, and why.
type ScriptError struct {
	Shell  string // the shell's argv[0]
	Script string // the -c argument
	Why    string // "it expands $HOME", ...
}

func (e *ScriptError) Error() string {
	return fmt.Sprintf("%s -c %q %v: %s", e.Shell, e.Script, ErrUnresolvedScript, e.Why)
}

func (e *ScriptError) Unwrap() error { return ErrUnresolvedScript }

// CommandPaths returns every path a command line runs or feeds a program
// as code, absolute and without duplicates, for the kernel to protect: the
// existing files ArgvFiles finds; a program named by a path; the script an
// interpreter runs (its
// first operand: python3 srv.py, node server.js, sh hook.sh), and the
// module python3 -m loads from the working directory, whether or not they
// exist yet (a file the model creates before a server's lazy start is as
// good as one it rewrites); the paths inside an interpreter's inline code
// (python3 -c, node -e, perl -e, ...) that look like paths; and, for a
// shell's -c script, all of the above for every command of the script,
// with the files it reads as input (< file) and runs (. file, source
// file), following literal cd's. Wrappers (env, nice, nohup, setsid,
// timeout, stdbuf, exec) are looked through.
//
// A shell script that cannot be resolved statically (it expands $VAR or
// ~, substitutes `commands` or $(commands), globs, reads a here document,
// or runs eval) returns a *ScriptError: what it runs is not known until
// it runs, so nothing can be said to protect it.
func CommandPaths(argv []string, dir string) ([]string, error) {
	var c collector
	err := c.command(argv, dir, 0)
	return c.out, err
}

type collector struct {
	out  []string
	seen map[string]bool
}

func (c *collector) add(paths ...string) {
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	for _, p := range paths {
		if p != "" && !c.seen[p] {
			c.seen[p] = true
			c.out = append(c.out, p)
		}
	}
}

// abs is p made absolute against dir (the working directory when empty).
func abs(p, dir string) string {
	if p == "" || strings.ContainsRune(p, 0) {
		return ""
	}
	if !filepath.IsAbs(p) {
		if dir == "" {
			dir, _ = os.Getwd()
		}
		p = filepath.Join(dir, p)
	}
	return filepath.Clean(p)
}

// maxDepth bounds scripts inside scripts (sh -c "sh -c '...'").
const maxDepth = 8

// wrappers run their operand as a command; the value says how many
// leading arguments of their own they take after their options (timeout
// DURATION).
var wrappers = map[string]int{"env": 0, "nice": 0, "nohup": 0, "setsid": 0, "timeout": 1, "stdbuf": 0, "exec": 0, "command": 0}

// shells run a -c script; interpreters run a script operand or inline
// code. The values are the options whose next argument is inline code.
var (
	shells       = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true, "yash": true, "posh": true}
	interpreters = map[string][]string{
		"python": {"-c"}, "node": {"-e", "--eval", "-p", "--print"}, "nodejs": {"-e", "--eval", "-p", "--print"},
		"deno": nil, "bun": {"-e", "--eval", "-p", "--print"}, "ruby": {"-e"}, "perl": {"-e", "-E"},
		"php": {"-r"}, "lua": {"-e"}, "Rscript": {"-e"}, "tclsh": nil, "pwsh": {"-c", "-Command"},
	}
	// valueOptions take the next argument as their value (not a script).
	valueOptions = map[string]bool{
		"-W": true, "-X": true, // python
		"-r": true, "--require": true, "--import": true, "--loader": true, "--experimental-loader": true, "-C": true, "--conditions": true, // node (the module it names is added)
		"-I": true, "-M": true, "-x": true, // perl, ruby
		"-o": true, "-O": true, // shells' set options (-o pipefail)
	}
	// moduleOptions name code the interpreter loads before the script.
	moduleOptions = map[string]bool{"-r": true, "--require": true, "--import": true, "--loader": true, "--experimental-loader": true}
)

// baseName is the program's name without a version (python3.12 -> python).
func baseName(prog string) string {
	b := filepath.Base(prog)
	if strings.HasPrefix(b, "python") {
		return "python"
	}
	if strings.HasPrefix(b, "lua") {
		return "lua"
	}
	return b
}

func (c *collector) command(argv []string, dir string, depth int) error {
	if len(argv) == 0 {
		return nil
	}
	if depth > maxDepth {
		return &ScriptError{Shell: argv[0], Script: strings.Join(argv, " "), Why: "scripts nest too deep"}
	}
	c.add(ArgvFiles(argv, dir)...)
	if strings.ContainsRune(argv[0], '/') {
		c.add(abs(argv[0], dir)) // the program itself, present or not
	}
	name := baseName(argv[0])
	args := argv[1:]
	if n, ok := wrappers[name]; ok {
		i := 0
		for i < len(args) && (strings.HasPrefix(args[i], "-") || (name == "env" && strings.Contains(args[i], "="))) {
			if name == "env" && (args[i] == "-u" || args[i] == "-C" || args[i] == "--chdir") && i+1 < len(args) {
				if args[i] != "-u" {
					dir = abs(args[i+1], dir)
				}
				i++
			}
			i++
		}
		i += n
		if i < len(args) {
			return c.command(args[i:], dir, depth+1)
		}
		return nil
	}
	if name == "busybox" && len(args) > 0 {
		return c.command(args, dir, depth+1)
	}
	if shells[name] {
		return c.shell(argv[0], args, dir, depth)
	}
	inline, ok := interpreters[name]
	if !ok {
		return nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case slices.Contains(inline, a) && i+1 < len(args):
			c.add(inlinePaths(args[i+1], dir)...)
			return nil
		case name == "python" && a == "-m" && i+1 < len(args):
			mod := strings.ReplaceAll(args[i+1], ".", string(filepath.Separator))
			c.add(abs(mod+".py", dir), abs(mod, dir))
			return nil
		case a == "--":
			if i+1 < len(args) {
				c.add(abs(args[i+1], dir))
			}
			return nil
		case valueOptions[a] && i+1 < len(args):
			if moduleOptions[a] && (strings.HasPrefix(args[i+1], ".") || strings.ContainsRune(args[i+1], '/')) {
				c.add(abs(args[i+1], dir))
			}
			i++
		case strings.HasPrefix(a, "-"):
		default:
			c.add(abs(a, dir)) // the script, present or not
			return nil
		}
	}
	return nil
}

// shell handles a shell's arguments: a -c script is parsed; otherwise the
// first operand is the script file.
func (c *collector) shell(sh string, args []string, dir string, depth int) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				c.add(abs(args[i+1], dir))
			}
			return nil
		case a == "-o" || a == "+o":
			i++
		case strings.HasPrefix(a, "-") && len(a) > 1 && !strings.HasPrefix(a, "--") && strings.ContainsRune(a[1:], 'c'):
			// -c, -ec, -xc...: the script is the first operand after
			// the options.
			for j := i + 1; j < len(args); j++ {
				if args[j] == "-o" || args[j] == "+o" {
					j++
					continue
				}
				if strings.HasPrefix(args[j], "-") || strings.HasPrefix(args[j], "+") {
					continue
				}
				return c.script(sh, args[j], dir, depth)
			}
			return nil
		case strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+"):
		default:
			c.add(abs(a, dir))
			return nil
		}
	}
	return nil
}

// script resolves a shell -c script: every command it runs, with the
// files it names, as command does for a command line.
func (c *collector) script(sh, src, dir string, depth int) error {
	cmds, err := parseScript(src)
	if err != nil {
		return &ScriptError{Shell: sh, Script: src, Why: err.Error()}
	}
	for _, cmd := range cmds {
		for _, in := range cmd.inputs {
			c.add(abs(in, dir))
		}
		words := cmd.words
		for len(words) > 0 && shellKeywords[words[0]] {
			words = words[1:]
		}
		for len(words) > 0 && assignment().MatchString(words[0]) {
			words = words[1:]
		}
		if len(words) == 0 {
			continue
		}
		switch words[0] {
		case "cd":
			if len(words) != 2 || words[1] == "-" {
				return &ScriptError{Shell: sh, Script: src, Why: "it changes to a directory the kernel cannot know (cd without one literal directory)"}
			}
			dir = abs(words[1], dir)
			continue
		case "eval":
			return &ScriptError{Shell: sh, Script: src, Why: "it runs eval"}
		case ".", "source":
			if len(words) > 1 {
				c.add(abs(words[1], dir))
			}
			continue
		}
		if err := c.command(words, dir, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// The regular expressions are compiled on first use, not at start-up:
// every binary that imports this package (the sandbox launcher, PID 1 of
// every sandbox) would otherwise compile them at each start (RATIONALE.md,
// "The sandbox's cold start, second round (issue 45)").
var (
	assignment    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`) })
	shellKeywords = map[string]bool{"if": true, "then": true, "else": true, "elif": true, "fi": true, "do": true, "done": true, "while": true, "until": true, "!": true, "{": true, "}": true, "time": true}
	// inlinePath finds what looks like a path in inline code: an absolute
	// path, or one that starts with ./ or ../, up to a quote, a space or
	// code punctuation.
	inlinePath = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?:^|[\s'"(\[,=:;])((?:\.{1,2})?/[^\s'"()\[\],;:{}<>|&` + "`" + `]+)`)
	})
)

// inlinePaths are the path-looking strings of an interpreter's inline code.
func inlinePaths(code, dir string) []string {
	var out []string
	for _, m := range inlinePath().FindAllStringSubmatch(code, -1) {
		if p := m[1]; p != "/" && p != "//" {
			out = append(out, abs(p, dir))
		}
	}
	return out
}

// shellCommand is one simple command of a script: its words (unquoted)
// and the files redirected into it (< file).
type shellCommand struct {
	words  []string
	inputs []string
}

// parseScript splits a POSIX shell script into simple commands, refusing
// (with the reason) what cannot be resolved without running it. It is
// deliberately strict: a construct it does not know is refused, never
// guessed.
func parseScript(src string) ([]shellCommand, error) {
	var (
		cmds    []shellCommand
		cur     shellCommand
		word    strings.Builder
		inWord  bool
		globbed bool
		redir   string // "<" or ">" while its target word is read
	)
	endWord := func() error {
		if !inWord {
			return nil
		}
		w := word.String()
		word.Reset()
		inWord = false
		if globbed && w != "[" && w != "[[" && w != "]]" {
			return fmt.Errorf("it expands a glob (%s)", w)
		}
		globbed = false
		switch redir {
		case "<":
			cur.inputs = append(cur.inputs, w)
		case ">":
			// Output: a file written, not run.
		default:
			cur.words = append(cur.words, w)
		}
		redir = ""
		return nil
	}
	endCmd := func() {
		if len(cur.words) > 0 || len(cur.inputs) > 0 {
			cmds = append(cmds, cur)
		}
		cur = shellCommand{}
	}
	for i := 0; i < len(src); i++ {
		ch := src[i]
		switch {
		case ch == '\'':
			j := strings.IndexByte(src[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("a quote is not closed")
			}
			word.WriteString(src[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case ch == '"':
			inWord = true
			for i++; ; i++ {
				if i >= len(src) {
					return nil, errors.New("a quote is not closed")
				}
				d := src[i]
				if d == '"' {
					break
				}
				if d == '$' || d == '`' {
					return nil, fmt.Errorf("it expands %s", expansionAt(src, i))
				}
				if d == '\\' && i+1 < len(src) && strings.IndexByte("$`\"\\\n", src[i+1]) >= 0 {
					i++
					d = src[i]
				}
				word.WriteByte(d)
			}
		case ch == '\\':
			if i+1 < len(src) {
				i++
				if src[i] != '\n' {
					word.WriteByte(src[i])
					inWord = true
				}
			}
		case ch == '$' || ch == '`':
			return nil, fmt.Errorf("it expands %s", expansionAt(src, i))
		case ch == '~' && !inWord:
			return nil, errors.New("it expands ~ (the home directory of whoever runs it)")
		case ch == '#' && !inWord:
			for i < len(src) && src[i] != '\n' {
				i++
			}
			i--
		case ch == '*' || ch == '?' || ch == '[':
			globbed = globbed || ch != '[' || strings.ContainsRune(src[i:], ']')
			word.WriteByte(ch)
			inWord = true
		case ch == ' ' || ch == '\t':
			if err := endWord(); err != nil {
				return nil, err
			}
		case ch == '\n' || ch == ';' || ch == '&' || ch == '|' || ch == '(' || ch == ')':
			if ch == '(' && i+1 < len(src) && src[i+1] == '(' {
				return nil, errors.New("it evaluates arithmetic")
			}
			if err := endWord(); err != nil {
				return nil, err
			}
			if redir != "" {
				return nil, errors.New("a redirection has no file")
			}
			endCmd()
		case ch == '<' || ch == '>':
			// A descriptor number written just before belongs to it.
			if inWord && isDigits(word.String()) {
				word.Reset()
				inWord = false
			}
			if err := endWord(); err != nil {
				return nil, err
			}
			next := byte(0)
			if i+1 < len(src) {
				next = src[i+1]
			}
			switch {
			case ch == '<' && next == '<':
				return nil, errors.New("it reads a here document")
			case next == '(':
				return nil, errors.New("it substitutes a process")
			case next == '&':
				// Duplicating a descriptor (2>&1): no file.
				i++
				for i+1 < len(src) && (src[i+1] >= '0' && src[i+1] <= '9' || src[i+1] == '-') {
					i++
				}
				continue
			case next == '>' || next == '|' || (ch == '<' && next == '>'):
				i++
			}
			redir = string(ch)
			if ch == '<' && next == '>' {
				redir = "<" // read and written: it is read
			}
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	if err := endWord(); err != nil {
		return nil, err
	}
	if redir != "" {
		return nil, errors.New("a redirection has no file")
	}
	endCmd()
	return cmds, nil
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// expansionAt names the expansion that starts at src[i], for messages.
func expansionAt(src string, i int) string {
	end := min(len(src), i+12)
	for j := i + 1; j < end; j++ {
		if c := src[j]; c == ' ' || c == '"' || c == '\'' || c == '/' || c == ';' {
			end = j
			break
		}
	}
	return src[i:end]
}

// Existing keeps the paths that are existing regular files (what a
// process needs to read), as Files would report them.
func Existing(paths []string) []string {
	var out []string
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			out = append(out, p)
		}
	}
	return out
}
