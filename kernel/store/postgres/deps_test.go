package postgres_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestNoBadgerInTheImportGraph: the PostgreSQL store links no Badger,
// neither our store nor dgraph's database. What both stores share (the
// export format, the session id rule, the placeholders of unreadable
// messages, the errors) lives in kernel and kernel/store/export, and a
// replica on PostgreSQL carries no embedded database it never opens.
func TestNoBadgerInTheImportGraph(t *testing.T) {
	const pkg = "github.com/agentkernel/agentkernel/kernel/store/postgres"
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", pkg).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/jackc/pgx/v5") {
		t.Fatalf("go list -deps %s does not list pgx: is the check looking at the right thing?\n%s", pkg, out)
	}
	for _, d := range deps {
		if strings.Contains(d, "/kernel/store/badger") || strings.HasPrefix(d, "github.com/dgraph-io/") {
			t.Errorf("%s imports %s", pkg, d)
		}
	}
}
