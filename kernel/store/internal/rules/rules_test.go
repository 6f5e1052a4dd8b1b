package rules

import (
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
)

func TestCheckID(t *testing.T) {
	for id, ok := range map[string]bool{
		"06h06p6rta3zzj1h": true, "a.b_c-D9": true, strings.Repeat("x", MaxIDLength): true,
		"": false, "a/b": false, "a b": false, "ü": false, strings.Repeat("x", MaxIDLength+1): false, "../x": false,
	} {
		if err := CheckID(id); (err == nil) != ok {
			t.Errorf("CheckID(%q) = %v, want ok %v", id, err, ok)
		}
	}
}

// TestPlaceholders: a lost tool result answers its call; a lost assistant
// message whose results were read becomes an assistant message making
// those calls, so the history stays valid for a provider.
func TestPlaceholders(t *testing.T) {
	msgs := []kernel.Message{
		{Seq: 1, Role: kernel.RoleUser, Content: "go"},
		{Seq: 2, Role: kernel.RoleAssistant, ToolCalls: []kernel.ToolCall{{ID: "c1", Name: "read_file"}}},
		{Seq: 3, Role: kernel.RoleTool, ToolCallID: "c1", ToolName: "read_file", Content: "x"},
		{Seq: 4, Role: kernel.RoleAssistant, ToolCalls: []kernel.ToolCall{{ID: "c2", Name: "list_dir"}}},
		{Seq: 5, Role: kernel.RoleTool, ToolCallID: "c2", ToolName: "list_dir", Content: "y"},
	}
	got := Placeholders(msgs, map[uint64]string{3: "checksum mismatch", 4: "truncated"})
	if len(got) != 2 || got[0] != 3 || got[1] != 4 {
		t.Fatalf("Placeholders replaced %v, want [3 4]", got)
	}
	if m := msgs[2]; m.Role != kernel.RoleTool || m.ToolCallID != "c1" || !strings.Contains(m.Content, "checksum mismatch") {
		t.Fatalf("the lost result: %+v", m)
	}
	if m := msgs[3]; m.Role != kernel.RoleAssistant || len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != "c2" {
		t.Fatalf("the lost assistant message: %+v", m)
	}
	if p := kernel.CheckHistory(msgs, nil); len(p) > 0 {
		t.Fatalf("the repaired history breaks the pairing: %v", p)
	}
}
