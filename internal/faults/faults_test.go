package faults_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/faults"
)

// TestOnlyTestsSetFaults: no file the kernel is built from installs a
// fault hook or reads the variable that arms one; only test files do.
func TestOnlyTestsSetFaults(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..", "..")
	var setters []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		src := string(b)
		if strings.Contains(src, "faults.Set(") || strings.Contains(src, "AK_TEST_FAULT") {
			rel, _ := filepath.Rel(root, p)
			setters = append(setters, rel)
			if !strings.HasSuffix(p, "_test.go") {
				t.Errorf("%s installs or arms a fault hook, and is not a test file", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(setters) == 0 {
		t.Fatal("no test file installs a fault hook: is the check looking at the right tree?")
	}
}

func TestAt(t *testing.T) {
	faults.At(faults.ToolRun, "x") // no hook: nothing
	var got []string
	faults.Set(func(point, arg string) { got = append(got, point+":"+arg) })
	defer faults.Set(nil)
	faults.At(faults.ToolRun, "write_file")
	if len(got) != 1 || got[0] != "tool.run:write_file" {
		t.Fatalf("the hook saw %v", got)
	}
}
