package export_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/schema"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/export"
)

var update = flag.Bool("update", false, "rewrite the .err golden files in testdata/import")

// session uses every field of the format: tool calls and results, an
// error result, reasoning, labels, usage and a pending approval.
func session() *kernel.Session {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	msgs := []kernel.Message{
		{Seq: 1, Role: kernel.RoleUser, Content: "list the files", Time: at(0)},
		{Seq: 2, Role: kernel.RoleAssistant, Content: "Looking.", Reasoning: "the user wants a listing", Time: at(1),
			ToolCalls: []kernel.ToolCall{{ID: "c1", Name: "list_dir", Arguments: `{"path":"."}`}}, Model: "gpt-test"},
		{Seq: 3, Role: kernel.RoleTool, ToolCallID: "c1", ToolName: "list_dir", Content: "a.go\n", IsError: false, Time: at(2)},
		{Seq: 4, Role: kernel.RoleAssistant, Content: "", Time: at(3),
			ToolCalls: []kernel.ToolCall{{ID: "c2", Name: "write_file", Arguments: `{"path":"README.md","content":"# demo <ok> & done"}`}}},
	}
	meta := kernel.SessionMeta{ID: "06h06p6rta3zzj1h", Title: "list the files", Model: "gpt-test", Status: kernel.StatusAwaitingApproval,
		Created: at(0), Updated: at(3), LastSeq: 4, Runs: 1, Turns: 2, Usage: kernel.Usage{InputTokens: 1200, OutputTokens: 80},
		CostUSD: 0.0042, Labels: map[string]string{"team": "infra"}}
	pending := &kernel.Approval{ID: "a1", SessionID: meta.ID, Call: msgs[3].ToolCalls[0],
		Args: json.RawMessage(`{"path":"README.md","content":"# demo <ok> & done"}`), RuleID: "writes", Created: at(3)}
	return &kernel.Session{Meta: meta, Messages: msgs, Pending: pending}
}

// interrupted is session() as a crash leaves it after the approved call's
// intent was stored: running, no pending approval, the round open.
func interrupted() *kernel.Session {
	se := session()
	se.Meta.Status = kernel.StatusRunning
	se.Meta.Round = &kernel.Round{Seq: 4, Started: []kernel.Intent{{CallID: "c2", Tool: "write_file", Time: se.Meta.Updated,
		Approval: &kernel.ApprovalRecord{ID: "a1", Approved: true, By: "alice"}}}}
	se.Pending = nil
	return se
}

// TestWriteRead: every line Write produces matches
// schemas/session-export.schema.json, and Read gives the session back.
func TestWriteRead(t *testing.T) {
	for name, se := range map[string]*kernel.Session{"awaiting approval": session(), "interrupted after an intent": interrupted()} {
		t.Run(name, func(t *testing.T) { testWriteRead(t, se) })
	}
}

func testWriteRead(t *testing.T, se *kernel.Session) {
	var out bytes.Buffer
	if err := export.Write(context.Background(), &out, se); err != nil {
		t.Fatal(err)
	}
	sch, err := schema.Embedded("session-export.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n")) {
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("line %d is not JSON: %v", i+1, err)
		}
		if err := sch.Validate(v); err != nil {
			t.Fatalf("line %d does not match schemas/session-export.schema.json: %v\n%s", i+1, err, line)
		}
	}
	if !bytes.Contains(out.Bytes(), []byte("<ok> & done")) {
		t.Fatal("Write escaped HTML characters: an export must keep the bytes")
	}
	got, err := export.Read(context.Background(), &out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, se) {
		t.Fatalf("Read(Write(s)) differs:\n got %+v\nwant %+v", got, se)
	}
}

// TestReadBad: every file in testdata/import is refused with the error in
// its .err golden file, which names the line.
func TestReadBad(t *testing.T) {
	files, err := filepath.Glob("testdata/import/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no files in testdata/import: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, err = export.Read(context.Background(), bytes.NewReader(in))
			var ie *export.ImportError
			if !errors.As(err, &ie) {
				t.Fatalf("Read = %v, want an *export.ImportError", err)
			}
			golden := strings.TrimSuffix(f, ".jsonl") + ".err"
			if *update {
				os.WriteFile(golden, []byte(err.Error()+"\n"), 0o644)
			}
			want, err2 := os.ReadFile(golden)
			if err2 != nil {
				t.Fatalf("%v (go test -update writes it)", err2)
			}
			if got := err.Error() + "\n"; got != string(want) {
				t.Fatalf("Read = %q, want %q (go test -update rewrites it)", got, want)
			}
		})
	}
}

func FuzzRead(f *testing.F) {
	files, _ := filepath.Glob("testdata/import/*.jsonl")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	var buf bytes.Buffer
	export.Write(context.Background(), &buf, session())
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, in []byte) {
		se, err := export.Read(context.Background(), bytes.NewReader(in))
		if err != nil {
			var ie *export.ImportError
			if !errors.As(err, &ie) {
				t.Fatalf("Read error %v is not an *export.ImportError", err)
			}
			return
		}
		if uint64(len(se.Messages)) != se.Meta.LastSeq {
			t.Fatalf("accepted %d messages with last_seq %d", len(se.Messages), se.Meta.LastSeq)
		}
		for i, m := range se.Messages {
			if m.Seq != uint64(i+1) {
				t.Fatalf("accepted seq %d at %d", m.Seq, i)
			}
		}
		if p := kernel.CheckHistory(se.Messages, se.Pending); len(p) > 0 {
			t.Fatalf("accepted a history CheckHistory refuses: %v", p)
		}
	})
}

func ExampleRead() {
	in := `{"type":"session","version":1,"meta":{"id":"s1","status":"idle","last_seq":2}}
{"type":"message","seq":1,"role":"user","content":"hello"}
{"type":"message","seq":3,"role":"assistant","content":"hi"}
`
	_, err := export.Read(context.Background(), strings.NewReader(in))
	fmt.Println(err)
	// Output: import session: line 3: seq is 3, want 2 (messages are numbered 1, 2, 3, ... in order)
}
