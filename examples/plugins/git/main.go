// Command git is a tool plugin that lets the model read a git repository:
// git_status, git_diff and git_log, all read-only, with validated arguments
// and capped output. It is built with the Go SDK (package sdk).
//
// Usage (as the kernel runs it; see docs/plugins.md):
//
//	git [-repo DIR] [-max-output BYTES] [-git PATH]
//
// -repo is the repository (default: the working directory); -git is the
// git binary (default: the first of $PATH, /usr/bin, /usr/local/bin, /bin
// that has one, as the kernel passes no PATH unless allowed).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentkernel/agentkernel/sdk"
)

func main() {
	repo := flag.String("repo", ".", "the repository to read")
	maxOutput := flag.Int("max-output", 64<<10, "cap on a result, in bytes")
	gitPath := flag.String("git", "", "the git binary (default: looked up)")
	flag.Parse()

	if flag.NArg() > 0 || *maxOutput <= 0 {
		fmt.Fprintf(os.Stderr, "git plugin: usage: git [-repo DIR] [-max-output BYTES] [-git PATH]\n")
		os.Exit(2)
	}
	abs, err := filepath.Abs(*repo)
	if err != nil {
		fmt.Fprintf(os.Stderr, "git plugin: -repo %s: %v\n", *repo, err)
		os.Exit(2)
	}
	g := &git{repo: abs, maxOutput: *maxOutput, bin: *gitPath}
	sdk.Serve(g.tools()...)
}
