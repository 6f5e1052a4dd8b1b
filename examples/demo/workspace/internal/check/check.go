// Package check finds broken relative links in Markdown files.
package check

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Broken is a link whose target does not exist.
type Broken struct {
	File   string
	Line   int
	Target string
}

var linkRE = regexp.MustCompile(`\]\(([^)#\s]+)`)

// Dir checks every *.md file under dir.
func Dir(dir string) ([]Broken, error) {
	var out []Broken
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		found, err := File(path)
		out = append(out, found...)
		return err
	})
	return out, err
}

// File checks one Markdown file.
func File(path string) ([]Broken, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Broken
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		for _, m := range linkRE.FindAllStringSubmatch(sc.Text(), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), target)); err != nil {
				out = append(out, Broken{File: path, Line: n, Target: target})
			}
		}
	}
	return out, sc.Err()
}
