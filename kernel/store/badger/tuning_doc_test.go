package badger

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocsValueThreshold holds docs/sessions.md to the code: its Tuning
// table states the value thresholds of cliTuning and serverTuning, and
// every "N KiB or more" / "N MiB or more" it says of values is one of
// them.
func TestDocsValueThreshold(t *testing.T) {
	b, err := os.ReadFile("../../../docs/sessions.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	cli, server := sizeText(cliTuning.valueThreshold), sizeText(serverTuning.valueThreshold)
	row := fmt.Sprintf("| value threshold (values of this size or more go to the value log) | %s | %s |", cli, server)
	if !strings.Contains(doc, row) {
		t.Errorf("docs/sessions.md lacks the Tuning row %q", row)
	}
	for _, m := range regexp.MustCompile(`(\d+ [KM]iB) or more`).FindAllStringSubmatch(doc, -1) {
		if m[1] != cli && m[1] != server {
			t.Errorf("docs/sessions.md says %q; the thresholds are %s (CLI) and %s (server)", m[0], cli, server)
		}
	}
}

// sizeText writes n bytes as the docs do: "1 MiB", "64 KiB".
func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
