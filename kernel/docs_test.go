package kernel_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
)

// TestDocsNameEveryStopReason holds the table of docs/architecture.md,
// "Stop reasons", to kernel.StopReasons: one row a stop reason, in the
// list's order, and the budget row.
func TestDocsNameEveryStopReason(t *testing.T) {
	tables := testutil.Tables(testutil.Section(testutil.ReadFile(t, "../docs/architecture.md"), "## Stop reasons"))
	if len(tables) != 1 {
		t.Fatalf("docs/architecture.md, \"Stop reasons\": %d tables, want 1", len(tables))
	}
	var rows []string
	for _, row := range tables[0][1:] {
		code := testutil.Code(row[0])
		if len(code) != 1 || len(row) < 2 || row[1] == "" {
			t.Errorf("docs/architecture.md, \"Stop reasons\": row %q: want `reason` | what it means", row)
			continue
		}
		rows = append(rows, code[0])
	}
	budget := string(kernel.BudgetStop("<id>"))
	if !slices.Contains(rows, budget) {
		t.Errorf("docs/architecture.md, \"Stop reasons\": no row for %s", budget)
	}
	rows = slices.DeleteFunc(rows, func(r string) bool { return r == budget })
	want := testutil.Strings(kernel.StopReasons())
	if !slices.Equal(rows, want) {
		t.Errorf("docs/architecture.md, \"Stop reasons\" names %v; kernel.StopReasons is %v: a stop reason is one row of that table, in the list's order (docs/architecture.md, \"Closed sets\")",
			strings.Join(rows, ", "), strings.Join(want, ", "))
	}
}
