package treetest

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// packageMapMarker heads the package map of docs/architecture.md: the
// code block after it has a line a package, its directory first.
const packageMapMarker = "<!-- package map:"

// packageMap returns the directories the package map of
// docs/architecture.md names, in order.
func packageMap(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs/architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, packageMapMarker)
	if i < 0 {
		t.Fatalf("docs/architecture.md has no %q marker before its package map", packageMapMarker)
	}
	block := text[i:]
	start := strings.Index(block, "```\n")
	if start < 0 {
		t.Fatal("docs/architecture.md: no code block after the package map's marker")
	}
	block = block[start+4:]
	block = block[:strings.Index(block, "```")]
	var dirs []string
	for _, line := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasSuffix(f[0], "/") {
			t.Errorf("docs/architecture.md package map: %q is not `DIR/  what it is`", line)
			continue
		}
		dirs = append(dirs, strings.TrimSuffix(f[0], "/"))
	}
	return dirs
}

// goPackages returns the directories of the module's Go packages: every
// directory with a .go file, but testdata, node_modules, bin, hidden
// directories and nested modules (a go.mod of their own).
func goPackages(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "bin" || name == "vendor") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); rel != "." && err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			dir := filepath.ToSlash(filepath.Dir(rel))
			if dir != "." && !slices.Contains(out, dir) {
				out = append(out, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPackageMapListsEveryPackage: the package map of docs/architecture.md
// has a line for every package of the module, and every line names a
// directory that exists: a new package fails here until the map says what
// it is, and a moved or deleted one until its line goes.
func TestPackageMapListsEveryPackage(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	listed := packageMap(t, root)
	pkgs := goPackages(t, root)
	if len(pkgs) < 40 {
		t.Fatalf("found %d packages under %s: the walk is wrong", len(pkgs), root)
	}
	for _, p := range pkgs {
		if !slices.Contains(listed, p) {
			t.Errorf("package %s is not in the package map of docs/architecture.md: add a line `%s/  what it is`", p, p)
		}
	}
	seen := map[string]bool{}
	for _, d := range listed {
		if seen[d] {
			t.Errorf("docs/architecture.md package map lists %s twice", d)
		}
		seen[d] = true
		if st, err := os.Stat(filepath.Join(root, d)); err != nil || !st.IsDir() {
			t.Errorf("docs/architecture.md package map lists %s/, which is no directory", d)
		}
	}
}
