package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// Golden compares got with the file at path, or writes it there when
// update is set (a test's -update flag): a missing or differing file
// fails the test, naming the path and how to accept the new output.
func Golden(t testing.TB, path, got string, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run the test with -update to accept):\n--- got\n%s--- want\n%s", path, got, want)
	}
}
