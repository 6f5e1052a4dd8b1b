package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mattn/go-runewidth"
)

// ansiSeq matches a terminal escape sequence (colours, cursor moves).
var ansiSeq = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// TestToolsFitAnEightyColumnTerminal: `kernel tools` on an 80-column
// terminal writes no line wider than 80 columns, the long cells cut with
// "…", while `kernel tools run_command` gives the whole entry, its grant
// uncut; through a pipe nothing is cut.
func TestToolsFitAnEightyColumnTerminal(t *testing.T) {
	dir, ws := t.TempDir(), t.TempDir()
	conf := filepath.Join(dir, "kernel.yaml")
	writeFiles(t, dir, map[string]string{"kernel.yaml": "workspace: " + ws + "\n" +
		"tools:\n  builtin:\n    enable: [read_file, list_dir, search, write_file, edit_file, run_command]\n" +
		"    command_sandbox: {fs: [{path: " + ws + "/a-rather-long-directory-name-for-a-cache, mode: rw, optional: true}]}\n"})

	cmd, tty, out, copied := startPTY(t, 80, terminalEnv(), "tools", "--config", conf)
	waitExit(t, cmd, tty, copied)
	screen := ansiSeq.ReplaceAllString(strings.ReplaceAll(out.String(), "\r\n", "\n"), "")
	for _, line := range strings.Split(strings.TrimRight(screen, "\n"), "\n") {
		if w := runewidth.StringWidth(line); w > 80 {
			t.Errorf("a line of %d columns on an 80-column terminal:\n%s", w, line)
		}
	}
	if !strings.Contains(screen, "run_command") || !strings.Contains(screen, "…") {
		t.Errorf("the table lacks run_command or a cut cell:\n%s", screen)
	}

	whole, errOut, err := cli(t, "tools", "--config", conf, "run_command")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var entry []toolJSON
	if err := json.Unmarshal([]byte(whole), &entry); err != nil || len(entry) != 1 {
		t.Fatalf("kernel tools run_command = %s (%v)", whole, err)
	}
	if g := entry[0].Granted; !strings.Contains(g, "a-rather-long-directory-name-for-a-cache") || strings.Contains(g, "…") {
		t.Errorf("the whole entry's grant is cut or incomplete: %q", g)
	}

	piped, _, err := cli(t, "tools", "--config", conf)
	if err != nil || !strings.Contains(piped, "a-rather-long-directory-name-for-a-cache") {
		t.Errorf("through a pipe the table is cut: %v\n%s", err, piped)
	}
}

func TestWriteTable(t *testing.T) {
	rows := [][]string{{"A", "LONG", "B"}, {"x", strings.Repeat("y", 50), "zz"}, {"xxxx", "short", "é"}}
	var b strings.Builder
	cut, err := writeTable(&b, rows, 30, 1)
	if err != nil || !cut {
		t.Fatalf("cut %v, %v", cut, err)
	}
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		if w := runewidth.StringWidth(l); w > 30 || strings.HasSuffix(l, " ") {
			t.Errorf("line %q: %d columns or trailing space", l, w)
		}
	}
	b.Reset()
	if cut, _ := writeTable(&b, rows, 0, 1); cut || !strings.Contains(b.String(), strings.Repeat("y", 50)) {
		t.Errorf("without a width the table was cut:\n%s", b.String())
	}
}
