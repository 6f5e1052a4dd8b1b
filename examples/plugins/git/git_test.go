package main

import (
	"github.com/agentkernel/agentkernel/sandbox"

	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sdk"
	"github.com/agentkernel/agentkernel/sdk/sdktest"
)

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
}

// makeRepo creates a repository with two commits, a staged change, an
// unstaged change and an untracked file.
func makeRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("init", "-q", "-b", "main")
	run("config", "user.email", "ada@example.com")
	run("config", "user.name", "Ada")
	write("README.md", "# demo\n")
	run("add", "README.md")
	run("commit", "-q", "-m", "Add the readme")
	write("main.go", "package main\n")
	run("add", "main.go")
	run("commit", "-q", "-m", "Add the entry point")
	write("main.go", "package main\n\nfunc main() {}\n")
	run("add", "main.go")
	write("README.md", "# demo\nchanged line\n")
	write("new.txt", "untracked\n")
	return dir
}

func TestTools(t *testing.T) {
	needGit(t)
	repo := makeRepo(t)
	p := sdktest.Start(t, (&git{repo: repo, maxOutput: 64 << 10}).tools()...)
	for _, s := range p.Specs() {
		if s.Tier != kernel.TierReadOnly {
			t.Errorf("%s has tier %s, want read_only", s.Name, s.Tier)
		}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name, tool, args string
		want             []string
		not              []string
	}{
		{"status", "git_status", `{}`, []string{"## main", "M  main.go", " M README.md", "?? new.txt"}, nil},
		{"status of a path", "git_status", `{"path":"README.md"}`, []string{" M README.md"}, []string{"main.go", "new.txt"}},
		{"unstaged diff", "git_diff", `{}`, []string{"+changed line"}, []string{"func main"}},
		{"staged diff", "git_diff", `{"staged":true}`, []string{"+func main() {}"}, []string{"changed line"}},
		{"diff stat against a revision", "git_diff", `{"base":"HEAD~1","stat":true}`, []string{"README.md", "main.go", "files changed"}, nil},
		{"diff without context", "git_diff", `{"context":0}`, []string{"@@ -1,0 +2 @@"}, nil},
		{"no differences", "git_diff", `{"path":"new.txt"}`, []string{"(no differences)"}, nil},
		{"log", "git_log", `{}`, []string{"2026-01-02 Ada: Add the entry point", "Ada: Add the readme"}, nil},
		{"log max_count", "git_log", `{"max_count":1}`, []string{"Add the entry point"}, []string{"readme"}},
		{"log of a path", "git_log", `{"path":"README.md"}`, []string{"Add the readme"}, []string{"entry point"}},
		{"log of a range", "git_log", `{"rev":"HEAD~1..HEAD"}`, []string{"entry point"}, []string{"readme"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := p.Call(ctx, tc.tool, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Content, w) {
					t.Errorf("output lacks %q:\n%s", w, res.Content)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(res.Content, n) {
					t.Errorf("output has %q:\n%s", n, res.Content)
				}
			}
		})
	}
}

func TestBadArguments(t *testing.T) {
	needGit(t)
	repo := makeRepo(t)
	p := sdktest.Start(t, (&git{repo: repo, maxOutput: 64 << 10}).tools()...)
	for _, tc := range []struct {
		name, tool, args string
		code             string
	}{
		{"option as a revision", "git_log", `{"rev":"--output=/tmp/pwned"}`, sdk.CodeInvalidArgs},
		{"option as a base", "git_diff", `{"base":"-p"}`, sdk.CodeInvalidArgs},
		{"option as a path", "git_status", `{"path":"--porcelain"}`, sdk.CodeInvalidArgs},
		{"absolute path", "git_status", `{"path":"/etc"}`, sdk.CodeInvalidArgs},
		{"path outside", "git_diff", `{"path":"../../etc/passwd"}`, sdk.CodeInvalidArgs},
		{"pathspec magic", "git_log", `{"path":":(top)x"}`, sdk.CodeInvalidArgs},
		{"unknown revision", "git_log", `{"rev":"no-such-branch"}`, sdk.CodeInvalidArgs},
		{"too many commits", "git_log", `{"max_count":1000}`, sdk.CodeInvalidArgs},
		{"unknown field", "git_status", `{"all":true}`, sdk.CodeInvalidArgs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Call(context.Background(), tc.tool, tc.args)
			var te *kernel.ToolError
			if !errors.As(err, &te) || te.Code != tc.code {
				t.Fatalf("err = %v, want code %s", err, tc.code)
			}
		})
	}
	if _, err := os.Stat("/tmp/pwned"); err == nil {
		t.Error("git wrote /tmp/pwned")
	}
	t.Run("not a repository", func(t *testing.T) {
		p := sdktest.Start(t, (&git{repo: t.TempDir(), maxOutput: 1 << 10}).tools()...)
		_, err := p.Call(context.Background(), "git_status", `{}`)
		if !errors.Is(err, sdk.ErrNotFound) {
			t.Fatalf("err = %v, want not_found", err)
		}
	})
}

func TestOutputCapped(t *testing.T) {
	needGit(t)
	repo := makeRepo(t)
	big := strings.Repeat("a long line of text for the diff\n", 2000)
	if err := os.WriteFile(filepath.Join(repo, "README.md"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	p := sdktest.Start(t, (&git{repo: repo, maxOutput: 1000}).tools()...)
	res, err := p.Call(context.Background(), "git_diff", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(res.Content, "\n[output truncated: ")
	if i < 0 || i > 1000 || !strings.HasSuffix(res.Content, ", limit 1000]") {
		t.Fatalf("output not capped at 1000 bytes with a marker: %d bytes, ends %q", len(res.Content), res.Content[max(0, len(res.Content)-60):])
	}
}

// TestRepositoryConfigCannotRunPrograms: a repository's own configuration
// names programs for git to run (fsmonitor, external diff, pager, hooks);
// the plugin must run none of them.
func TestRepositoryConfigCannotRunPrograms(t *testing.T) {
	needGit(t)
	repo := makeRepo(t)
	mark := filepath.Join(t.TempDir(), "ran")
	script := filepath.Join(t.TempDir(), "evil.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$0 $*\" >> "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{
		{"core.fsmonitor", script},
		{"diff.external", script},
		{"core.pager", script},
		{"core.hooksPath", filepath.Dir(script)},
	} {
		cmd := exec.Command("git", "-C", repo, "config", kv[0], kv[1])
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	// Sanity: the configuration is live for plain git.
	cmd := exec.Command("git", "-C", repo, "status")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null")
	_ = cmd.Run()
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("plain git status did not run the fsmonitor script, so this test proves nothing: %v", err)
	}
	os.Remove(mark)

	p := sdktest.Start(t, (&git{repo: repo, maxOutput: 64 << 10}).tools()...)
	for _, c := range [][2]string{{"git_status", `{}`}, {"git_diff", `{}`}, {"git_diff", `{"staged":true}`}, {"git_log", `{}`}} {
		if _, err := p.Call(context.Background(), c[0], c[1]); err != nil {
			t.Fatalf("%s: %v", c[0], err)
		}
	}
	if b, err := os.ReadFile(mark); err == nil {
		t.Fatalf("the plugin let git run a program from the repository's configuration: %s", b)
	}
}

// TestAsSubprocess runs the real binary through the kernel's host, with no
// environment (so no PATH: the plugin must find git itself).
func TestAsSubprocess(t *testing.T) {
	needGit(t)
	repo := makeRepo(t)
	bin, sum := pluginBinary(t)
	// Confined: git and its helpers from the system directories, the
	// repository read-only, nothing else.
	grant := sandbox.Grant{FS: append(sandbox.SystemDirs(), sandbox.FSRule{Path: repo, Mode: "ro"})}
	p := sdktest.Exec(t, subprocess.PluginConfig{Name: "git", Path: bin, SHA256: sum, Args: []string{"-repo", repo}, Sandbox: grant})
	specs := p.Specs()
	if len(specs) != 3 || specs[0].Name != "git.git_status" || specs[0].Source != "subprocess:git" {
		t.Fatalf("specs = %+v", specs)
	}
	res, err := p.Call(context.Background(), "git_log", `{"max_count":1}`)
	if err != nil || !strings.Contains(res.Content, "Add the entry point") {
		t.Fatalf("git_log = %q, %v", res.Content, err)
	}
}

// pluginBinary is the plugin's binary and its sha256. Under make test
// (AGENTKERNEL_REQUIRE_ARTIFACTS=1) it is bin/plugins/git, which make
// builds from this package first (make plugins) and kernel.yaml pins:
// linking a second copy here took about half this package's time
// (RATIONALE.md, "The plugin SDKs' tests and builds (issue 45)"). Run
// alone, the test builds its own.
func pluginBinary(t *testing.T) (string, string) {
	t.Helper()
	if os.Getenv("AGENTKERNEL_REQUIRE_ARTIFACTS") != "1" {
		return sdktest.Build(t, ".")
	}
	bin, err := filepath.Abs("../../../bin/plugins/git")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := sdktest.FileSHA256(bin)
	if err != nil {
		t.Fatalf("%v: make test builds it first (make plugins)", err)
	}
	return bin, sum
}

// TestRepositoryFilterAttack is issue 11's attack: the model writes a
// filter into .git/config and a .gitattributes naming it, then asks for a
// diff. Plain git runs the filter; the plugin must not, whatever the
// filter's (or textconv's) name, "=" in it included.
func TestRepositoryFilterAttack(t *testing.T) {
	needGit(t)
	repo := makeRepo(t)
	mark := filepath.Join(t.TempDir(), "ran")
	script := filepath.Join(t.TempDir(), "evil.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$0 $*\" >> "+mark+"\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("[filter \"x\"]\n\tclean = %[1]s\n\tsmudge = %[1]s\n[filter \"a=b\"]\n\tclean = %[1]s\n[diff \"y\"]\n\ttextconv = %[1]s\n", script)
	f, err := os.OpenFile(filepath.Join(repo, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(cfg)
	f.Close()
	if err := os.WriteFile(filepath.Join(repo, ".gitattributes"), []byte("*.md filter=x diff=y\n*.go filter=a=b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "README.md"), []byte("# changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Sanity: plain git runs the filter on a diff.
	cmd := exec.Command("git", "-C", repo, "diff")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	_ = cmd.Run()
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("plain git diff did not run the filter, so this test proves nothing: %v", err)
	}
	os.Remove(mark)

	p := sdktest.Start(t, (&git{repo: repo, maxOutput: 64 << 10}).tools()...)
	for _, c := range [][2]string{{"git_status", `{}`}, {"git_diff", `{}`}, {"git_diff", `{"stat":true}`}, {"git_diff", `{"staged":true}`}, {"git_log", `{}`}} {
		if _, err := p.Call(context.Background(), c[0], c[1]); err != nil {
			t.Fatalf("%s: %v", c[0], err)
		}
	}
	if b, err := os.ReadFile(mark); err == nil {
		t.Fatalf("the plugin let git run a repository-configured filter: %s", b)
	}
}

// TestSubmoduleFilterAttack: a filter written into a submodule's own
// configuration (.git/modules/sub/config), which the plugin's key-by-key
// overrides of the superproject's configuration do not cover, must not run
// on git_status or git_diff. Plain git status and diff run it (git looks
// inside the submodule to see whether it is modified).
func TestSubmoduleFilterAttack(t *testing.T) {
	needGit(t)
	dir := t.TempDir()
	env := append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com", "GIT_COMMITTER_NAME=Ada", "GIT_COMMITTER_EMAIL=ada@example.com")
	run := func(in string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = in, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	sub, repo := filepath.Join(dir, "sub"), filepath.Join(dir, "super")
	run(dir, "init", "-q", "-b", "main", sub)
	os.WriteFile(filepath.Join(sub, "a.md"), []byte("hello\n"), 0o644)
	run(sub, "add", "a.md")
	run(sub, "commit", "-q", "-m", "a")
	run(dir, "init", "-q", "-b", "main", repo)
	run(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, "sub")
	run(repo, "commit", "-q", "-m", "add the submodule")

	mark := filepath.Join(t.TempDir(), "ran")
	script := filepath.Join(t.TempDir(), "evil.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$0 $*\" >> "+mark+"\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(repo, ".git", "modules", "sub", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "[filter \"x\"]\n\tclean = %s\n", script)
	f.Close()
	os.WriteFile(filepath.Join(repo, "sub", ".gitattributes"), []byte("*.md filter=x\n"), 0o644)
	// Same size, new mtime: git must read the file (through the filter)
	// to know whether it changed.
	n := 0
	touch := func() {
		t.Helper()
		n++
		if err := os.WriteFile(filepath.Join(repo, "sub", "a.md"), []byte("HELLO\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		future := time.Now().Add(time.Duration(n) * time.Second)
		os.Chtimes(filepath.Join(repo, "sub", "a.md"), future, future)
	}

	// Sanity: plain git runs the submodule's filter.
	touch()
	cmd := exec.Command("git", "-C", repo, "status")
	cmd.Env = env
	_ = cmd.Run()
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("plain git status did not run the submodule's filter, so this test proves nothing: %v", err)
	}
	os.Remove(mark)

	p := sdktest.Start(t, (&git{repo: repo, maxOutput: 64 << 10}).tools()...)
	for _, c := range [][2]string{{"git_status", `{}`}, {"git_diff", `{}`}, {"git_diff", `{"stat":true}`}, {"git_diff", `{"base":"HEAD"}`}, {"git_log", `{}`}} {
		touch()
		if _, err := p.Call(context.Background(), c[0], c[1]); err != nil {
			t.Fatalf("%s %s: %v", c[0], c[1], err)
		}
		if b, err := os.ReadFile(mark); err == nil {
			t.Fatalf("%s %s let git run a filter from a submodule's configuration: %s", c[0], c[1], b)
		}
	}
}
