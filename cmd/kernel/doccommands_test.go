package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// docCommand is one `kernel ...` line of a ```sh block in the docs.
type docCommand struct {
	file, line string
}

// docFiles are the documents whose commands must work as written.
var docFiles = []string{"README.md", "docs/*.md", "sdk/README.md", "wasm-tools/README.md"}

// docCommandsCoveredBy are the commands that cannot run offline as written
// (a placeholder, a plugin a test builds first, a download), each with the
// test that exercises it.
var docCommandsCoveredBy = map[string]string{
	"kernel approve SESSION_ID":                                       "TestApproveAndRejectUnderCodingPolicy",
	"kernel serve --config kernel.yaml":                               "serve's tests (a real server on a loopback port) and make serve",
	"kernel keys create ci --scopes run,read --config kernel.yaml":    "TestServeDocsKeyFile (runs it beside a kernel.yaml)",
	"kernel plugins verify --config kernel.yaml":                      "sdk TestReadme",
	"kernel tools --config kernel.yaml":                               "sdk TestReadme",
	"go install github.com/agentkernel/agentkernel/cmd/kernel@latest": "TestGoInstallFromClone (the same package from the checkout)",
	"go install ./cmd/kernel":                                         "TestGoInstallFromClone",
	// docs/agents.md's runs write into the example's workspace: the tests
	// run them on a copy.
	"kernel run --config examples/agents/kernel.yaml --agent coder Add a greeting to main.go": "TestAgentsDelegationCLI",
	"kernel run --config examples/agents/kernel.yaml --pipeline review main.go":               "TestAgentsPipelineCLI",
	// docs/providers.md: the user's config directory has the README's by then.
	"kernel init --provider anthropic": "TestInitAnthropic",
	// docs/plugins.md's tutorials run in a directory of their own.
	"kernel plugins lock plugin": "sdk TestTutorials",
	"kernel run --config kernel.yaml --script watch.yaml How many words are in: the quick brown fox?": "sdk TestTutorials",
	// docs/sessions.md's PostgreSQL lines need a database.
	"kernel store migrate --config kernel.yaml":                                                                               "TestReplicaProcesses (newCluster migrates a real database)",
	"kernel keys create ci --scopes run,read,approve --keys /etc/agentkernel/keys.json":                                       "TestReplicaProcesses (newCluster creates the key the replicas share)",
	"kernel serve --config kernel.yaml --keys /etc/agentkernel/keys.json --listen 127.0.0.1:8080 --replica a --auto-resume &": "TestReplicaProcesses (two replicas, real processes)",
	"kernel serve --config kernel.yaml --keys /etc/agentkernel/keys.json --listen 127.0.0.1:8081 --replica b --auto-resume &": "TestReplicaProcesses (two replicas, real processes)",
	"kernel store copy --store ~/.local/share/agentkernel --to pg.yaml":                                                       "TestStoreCopy",
	"kernel store copy --config pg.yaml --to-store /srv/agentkernel-backup":                                                   "TestStoreCopy",
}

var shBlock = regexp.MustCompile("(?s)```(?:sh|bash|shell)\n(.*?)```")

func docCommands(t *testing.T, root string) []docCommand {
	t.Helper()
	var out []docCommand
	for _, pattern := range docFiles {
		files, _ := filepath.Glob(filepath.Join(root, pattern))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(root, f)
			for _, m := range shBlock.FindAllSubmatch(b, -1) {
				body := strings.ReplaceAll(string(m[1]), "\\\n", " ")
				for _, line := range strings.Split(body, "\n") {
					line = strings.TrimSpace(line)
					if strings.HasPrefix(line, "kernel ") || strings.HasPrefix(line, "bin/kernel ") || strings.HasPrefix(line, "go install ") {
						out = append(out, docCommand{rel, line})
					}
				}
			}
		}
	}
	return out
}

// shellWords splits a command line the way sh would for these simple
// lines: quotes, an unquoted # starts a comment, > ends the command.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord, quote := false, byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case (c == '#' || c == '>') && !inWord:
			return words
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestDocCommands runs every `kernel` command of the README and docs/ as
// written, from the repository root, with fresh XDG directories: those that
// need a real model are checked up to the model call (`config show` with
// the same flags: the flags and files they name are valid), the others run
// for real, and the few that cannot run offline name the test that covers
// them.
func TestDocCommands(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(tmp, "config"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(tmp, "data"))
	t.Setenv("OPENAI_API_KEY", "")
	t.Chdir(root)
	scratch := filepath.Join(tmp, "scratch")
	os.MkdirAll(scratch, 0o700)
	// docs/scripted.md's mine.yaml, from the block that defines it.
	if b, err := os.ReadFile("docs/scripted.md"); err == nil {
		if m := regexp.MustCompile("(?s)```yaml\n# mine.yaml[^\n]*\n(.*?)```").FindSubmatch(b); m != nil {
			os.WriteFile(filepath.Join(tmp, "mine.yaml"), m[1], 0o600)
		}
	}
	subst := map[string]string{
		"/tmp/ak-store": filepath.Join(tmp, "ak-store"),
		"/tmp/scratch":  scratch,
		"mine.yaml":     filepath.Join(tmp, "mine.yaml"),
	}
	lastSession := ""
	cmds := docCommands(t, root)
	if len(cmds) < 10 {
		t.Fatalf("only %d commands found in the docs: is the extraction broken?", len(cmds))
	}
	for _, dc := range cmds {
		t.Run(dc.file+": "+dc.line, func(t *testing.T) {
			words := shellWords(dc.line)
			key := strings.Join(words, " ")
			key = strings.TrimPrefix(key, "bin/")
			if test, ok := docCommandsCoveredBy[key]; ok {
				t.Logf("covered by %s", test)
				return
			}
			if words[0] == "go" {
				t.Fatalf("a go command no test covers: %s", dc.line)
			}
			var args []string
			for _, w := range words[1:] {
				if s, ok := subst[w]; ok {
					w = s
				}
				if w == "06h06szknzfvyh41" && lastSession != "" {
					w = lastSession // the README's example id: the id of the run before
				}
				if strings.ContainsAny(w, "*?[") && !strings.Contains(w, " ") {
					if m, _ := filepath.Glob(w); len(m) > 0 {
						args = append(args, m...)
						continue
					}
				}
				args = append(args, w)
			}
			needsModel := (args[0] == "run" || args[0] == "chat") && !slices.Contains(args, "--script")
			if needsModel {
				// Everything up to the model call: the same flags, no prompt.
				var flags []string
				for i := 1; i < len(args); i++ {
					if strings.HasPrefix(args[i], "--") {
						flags = append(flags, args[i])
						if i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
							flags = append(flags, args[i+1])
							i++
						}
					}
				}
				args = append([]string{"config", "show"}, flags...)
				t.Logf("needs a model (run for real by TestRunAgainstOpenAICompatibleServer); checked: kernel %s", strings.Join(args, " "))
			}
			out, stderr, err := cli(t, args...)
			if code, msg := exitStatus(err); code != 0 {
				t.Fatalf("exit %d: %s\nstdout:\n%s\nstderr:\n%s", code, msg, out, stderr)
			}
			if m := regexp.MustCompile(`session (\S+) \(new\)`).FindStringSubmatch(stderr); m != nil {
				lastSession = m[1]
			}
		})
	}
}

// TestGoInstallFromClone is the README's install line, from the checkout:
// `go install ./cmd/kernel` into an empty GOBIN gives a kernel that runs.
// (`@latest` is the same package fetched from the module proxy; the test
// never touches the network.)
func TestGoInstallFromClone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the kernel")
	}
	t.Parallel() // main_test.go, "Parallel tests"
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	gobin := t.TempDir()
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	// -ldflags=-s -w, as make build links bin/kernel: no symbol table or
	// DWARF to write, which is half of the link's CPU (17 s -> 9 s, the
	// whole of this test's cost); the program is the same.
	cmd := exec.Command(goCmd, "install", "-ldflags=-s -w", "./cmd/kernel")
	cmd.Dir = root
	// -trimpath, as `make build` builds bin/kernel: the compiled packages
	// are then the build cache's entries make build left, not a second
	// compile of every dependency (minutes on a fresh clone); whether the
	// module installs from the checkout does not depend on either flag.
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOPROXY=off", "GOFLAGS=-mod=readonly -trimpath")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install ./cmd/kernel: %v\n%s", err, b)
	}
	out, err := exec.Command(filepath.Join(gobin, "kernel"), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "kernel ") {
		t.Fatalf("installed kernel version: %v\n%s", err, out)
	}
}
