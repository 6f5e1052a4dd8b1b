package builtin

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/hooks"
)

// BenchmarkReadFile reads a 2,000-line (114 KiB) Go-like file: the first
// window, capped at 64 KiB of output.
func BenchmarkReadFile(b *testing.B) {
	e := newEnv(b, Config{})
	var src strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&src, "\tresult := compute(%d, \"some string literal\") // comment\n", i)
	}
	mkfiles(b, e.root, map[string]string{"big.go": src.String()})
	args := `{"path":"big.go"}`
	b.SetBytes(int64(src.Len()))
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.call(b, "read_file", args); err != nil {
			b.Fatal(err)
		}
	}
}

// searchTree makes 300 files of 200 lines in 10 directories; every tenth
// file has 3 matching lines.
func searchTree(b *testing.B, cfg Config) *env {
	e := newEnv(b, cfg)
	files := map[string]string{}
	for f := range 300 {
		var src strings.Builder
		for l := range 200 {
			if f%10 == 0 && l%70 == 5 {
				fmt.Fprintf(&src, "func HandleRequest%d(w Writer) error { return nil }\n", l)
				continue
			}
			fmt.Fprintf(&src, "\tvalue%d := process(input, %d) // ordinary line of code\n", l, f)
		}
		files[fmt.Sprintf("pkg%d/file%03d.go", f%10, f)] = src.String()
	}
	mkfiles(b, e.root, files)
	return e
}

// BenchmarkSearch searches 300 files (3.3 MiB) for a literal and a
// regular expression.
func BenchmarkSearch(b *testing.B) {
	e := searchTree(b, Config{})
	for _, bc := range []struct{ name, args string }{
		{"literal", `{"pattern":"HandleRequest"}`},
		{"ignore_case_ascii", `{"pattern":"handlereque","ignore_case":true}`},
		// k and s fold to non-ASCII letters too: this one takes the (?i) regexp path.
		{"ignore_case_regexp", `{"pattern":"handlerequest","ignore_case":true}`},
		{"regex", `{"pattern":"^func Handle\\w+\\(","regex":true}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			res, err := e.call(b, "search", bc.args)
			if err != nil || !strings.Contains(res.Content, "90 matching lines in 30 files") {
				b.Fatalf("unexpected result %q, %v", res.Content[:min(200, len(res.Content))], err)
			}
			for b.Loop() {
				if _, err := e.call(b, "search", bc.args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSearchScrubbed is BenchmarkSearch/literal with the credential
// scrubber on: the 30 files with matches are scrubbed and matched again
// (search matches what the model may see).
func BenchmarkSearchScrubbed(b *testing.B) {
	sc, err := hooks.NewScrubber(hooks.ScrubberConfig{})
	if err != nil {
		b.Fatal(err)
	}
	e := searchTree(b, Config{Scrub: sc.ScrubLines})
	args := `{"pattern":"HandleRequest"}`
	for b.Loop() {
		if _, err := e.call(b, "search", args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteFileProtected writes a small file in a workspace holding
// a .git directory and with ten kernel files to check it against (by
// folded name and by identity).
func BenchmarkWriteFileProtected(b *testing.B) {
	base := b.TempDir()
	var protected []string
	for i := range 10 {
		protected = append(protected, filepath.Join(base, fmt.Sprintf("conf%d.yaml", i)))
	}
	e := newEnv(b, Config{Protected: protected})
	mkfiles(b, e.root, map[string]string{".git/config": "[core]\n"})
	args := `{"path":"src/deep/dir/notes.txt","content":"some text\n"}`
	for b.Loop() {
		if _, err := e.call(b, "write_file", args); err != nil {
			b.Fatal(err)
		}
	}
}
