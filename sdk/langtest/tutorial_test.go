package langtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// tutorialBlock is one step of a tutorial: commands, a file to write, or
// the output the reader should see.
type tutorialBlock struct {
	file   string // "" for commands
	pin    string // for a kernel.yaml: what its sha256 pins
	text   string
	output bool // a ```text block: what the commands before it print
}

var (
	tutorialRE = regexp.MustCompile(`(?s)<!-- tutorial: (\w+) -->\n(.*?)<!-- end of tutorial: (\w+) -->`)
	blockRE    = regexp.MustCompile("(?s)(?:<!-- tutorial-file: ([^ ]+?)(?: \\(pin: ([^)]+)\\))? -->\n)?```(\\w*)\n(.*?)```")
)

// tutorials parses the tutorials of docs/plugins.md: their ```sh blocks and
// the blocks marked as files, in order.
func tutorials(t *testing.T) map[string][]tutorialBlock {
	t.Helper()
	doc := readFile(t, filepath.Join(root, "docs/plugins.md"))
	out := map[string][]tutorialBlock{}
	for _, m := range tutorialRE.FindAllStringSubmatch(doc, -1) {
		if m[1] != m[3] {
			t.Fatalf("docs/plugins.md: tutorial %s ends as %s", m[1], m[3])
		}
		for _, b := range blockRE.FindAllStringSubmatch(m[2], -1) {
			switch {
			case b[1] != "":
				out[m[1]] = append(out[m[1]], tutorialBlock{file: b[1], pin: b[2], text: b[4]})
			case b[3] == "sh":
				out[m[1]] = append(out[m[1]], tutorialBlock{text: b[4]})
			case b[3] == "text":
				out[m[1]] = append(out[m[1]], tutorialBlock{text: b[4], output: true})
			}
		}
	}
	return out
}

// script is the tutorial as one shell script: its commands as written,
// its files written where it says, and each kernel.yaml's sha256 what the
// reader pastes there: the binary's sha256, or the lock's.
func script(blocks []tutorialBlock) string {
	var b strings.Builder
	b.WriteString("set -euo pipefail\n")
	for _, bl := range blocks {
		if bl.output {
			continue
		}
		if bl.file == "" {
			b.WriteString(bl.text)
			continue
		}
		fmt.Fprintf(&b, "mkdir -p \"$(dirname %q)\"\ncat > %q <<'TUTORIAL_EOF'\n%sTUTORIAL_EOF\n", bl.file, bl.file, bl.text)
		if bl.pin != "" {
			fmt.Fprintf(&b, "if [ -d %[1]q ]; then sum=$(sha256sum %[1]q/agentkernel.lock); else sum=$(sha256sum %[1]q); fi\n", bl.pin)
			fmt.Fprintf(&b, "sed -i \"s/^\\( *sha256:\\).*/\\1 ${sum%%%% *}/\" %q\n", bl.file)
		}
	}
	return b.String()
}

// TestTutorials runs each tutorial of docs/plugins.md as written, in a
// fresh directory, without network: Go modules from the module cache, npm
// packages from the cache `make sdk` fills, the kernel from bin/.
func TestTutorials(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs three plugins")
	}
	all := tutorials(t)
	for _, lang := range languages {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			blocks := all[lang]
			if len(blocks) < 5 {
				t.Fatalf("docs/plugins.md: tutorial %s has %d blocks", lang, len(blocks))
			}
			artifact(t, "bin/kernel")
			switch lang {
			case "typescript":
				node(t)
				artifact(t, "bin/sdk/agentkernel-plugin-sdk-0.1.0.tgz")
				matches, _ := filepath.Glob(filepath.Join(root, "bin/npm-cache/.tutorial-*"))
				need(t, "the npm cache of the tutorial's packages", len(matches) > 0)
			case "python":
				needPython(t)
			}
			dir := t.TempDir()
			// The go command's caches stay where they are (HOME moves).
			goenv, err := exec.Command("go", "env", "GOPATH", "GOMODCACHE", "GOCACHE").Output()
			if err != nil {
				t.Fatal(err)
			}
			gopath := strings.Fields(string(goenv))
			cmd := exec.Command("bash", "-c", script(blocks))
			cmd.Dir = dir
			cmd.Env = append(os.Environ(),
				"PATH="+filepath.Join(root, "bin")+":"+os.Getenv("PATH"),
				"AGENTKERNEL="+root,
				"HOME="+dir,
				"XDG_CONFIG_HOME="+dir+"/.config", "XDG_DATA_HOME="+dir+"/.local/share",
				"XDG_CACHE_HOME="+dir+"/.cache", "XDG_STATE_HOME="+dir+"/.local/state",
				// No network: npm from make's cache, Go from the module cache.
				"npm_config_cache="+filepath.Join(root, "bin/npm-cache"), "npm_config_offline=true",
				"npm_config_fund=false", "npm_config_audit=false", "npm_config_update_notifier=false",
				// GOFLAGS=-trimpath (and none of this process's): the
				// tutorial's `go test` then compiles the SDK's packages as
				// its `go build -trimpath` and make's bin/kernel do, once,
				// instead of a second time with this machine's paths in
				// them (RATIONALE.md, "One build configuration per binary
				// kind (issue 45)"). The commands run are the doc's.
				"GOPROXY=off", "GOSUMDB=off", "GOFLAGS=-trimpath",
				"GOPATH="+gopath[0], "GOMODCACHE="+gopath[1], "GOCACHE="+gopath[2],
			)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the tutorial failed: %v\n%s\n--- the script:\n%s", err, out, script(blocks))
			}
			for _, want := range []string{"ok   hello", "→ hello.count_words", "✓ hello.count_words", "That text has 4 words."} {
				if !strings.Contains(string(out), want) {
					t.Errorf("the tutorial's output lacks %q:\n%s", want, out)
				}
			}
			shown := 0
			for _, bl := range blocks {
				if !bl.output {
					continue
				}
				shown++
				if missing := shownOutput(bl.text, string(out)); missing != "" {
					t.Errorf("docs/plugins.md shows output the tutorial does not print: %q (the whole output, whose lines it shows in order, is below)\n%s", missing, out)
				}
			}
			if shown == 0 {
				t.Errorf("docs/plugins.md: tutorial %s shows no expected output (a ```text block)", lang)
			}
		})
	}
}

// outputNoise is what differs from run to run in the output a tutorial
// shows: session ids (the docs abbreviate them, 06h1f…) and durations.
var outputNoise = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`session \S+ \(new\)`), "session ID (new)"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s)\b`), "DURATION"},
}

// shownOutput checks that every line of a tutorial's shown output (a
// ```text block) is printed, in that order, by the commands before it, and
// returns the first line that is not ("" when all are).
func shownOutput(shown, out string) string {
	norm := func(s string) string {
		for _, n := range outputNoise {
			s = n.re.ReplaceAllString(s, n.with)
		}
		return strings.TrimRight(s, " ")
	}
	lines := strings.Split(out, "\n")
	at := 0
	for _, want := range strings.Split(strings.TrimRight(shown, "\n"), "\n") {
		if strings.TrimSpace(want) == "" {
			continue
		}
		w := norm(want)
		for at < len(lines) && norm(lines[at]) != w {
			at++
		}
		if at == len(lines) {
			return want
		}
		at++
	}
	return ""
}

func TestShownOutput(t *testing.T) {
	out := "noise\nsession 06h23zrkmpq7khpa (new) · model scripted\n  ✓ hello.count_words · 644.5ms · 1 B\nThat text has 4 words.\n"
	if m := shownOutput("session 06h1f… (new) · model scripted\n  ✓ hello.count_words · 1.5s · 1 B\nThat text has 4 words.\n", out); m != "" {
		t.Errorf("matching output: %q missing", m)
	}
	for _, shown := range []string{"That text has 5 words.\n", "That text has 4 words.\n  ✓ hello.count_words · 1.5s · 1 B\n"} {
		if m := shownOutput(shown, out); m == "" {
			t.Errorf("%q: a line not printed (or out of order) passed", shown)
		}
	}
}
