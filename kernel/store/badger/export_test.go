package badger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/schema"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/export"
	"github.com/agentkernel/agentkernel/kernel/store/internal/rules"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fixture is a session that uses every field of the export format: tool
// calls and results, an error result, reasoning, labels, usage and a
// pending approval.
func fixture() (kernel.SessionMeta, []kernel.Message, *kernel.Approval) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	msgs := []kernel.Message{
		{Seq: 1, Role: kernel.RoleUser, Content: "list the files", Time: at(0)},
		{Seq: 2, Role: kernel.RoleAssistant, Content: "Looking.", Reasoning: "the user wants a listing", Time: at(1),
			ToolCalls: []kernel.ToolCall{{ID: "c1", Name: "list_dir", Arguments: `{"path":"."}`}, {ID: "c2", Name: "git.git_status", Arguments: `{}`}},
			Model:     "gpt-test", ReasoningField: "reasoning_content",
			Protocol: &kernel.ProtocolNote{Raw: "Looking.<tool_call>{\"name\": \"list_dir\", \"arguments\": {\"path\":\".\"}}</tool_call><tool_call>{\"name\": \"git.git_status\"}</tool_call>"}},
		{Seq: 3, Role: kernel.RoleTool, ToolCallID: "c1", ToolName: "list_dir", Content: "a.go\nb.go\n", Time: at(2)},
		{Seq: 4, Role: kernel.RoleTool, ToolCallID: "c2", ToolName: "git.git_status", Content: "error: not a repository", IsError: true, Time: at(2)},
		{Seq: 5, Role: kernel.RoleAssistant, Content: "Two Go files: a.go and b.go ✓ <ok> & done", Time: at(3)},
		{Seq: 6, Role: kernel.RoleUser, Content: "write a README", Time: at(10)},
		{Seq: 7, Role: kernel.RoleAssistant, Content: "", Time: at(11),
			ToolCalls: []kernel.ToolCall{{ID: "c3", Name: "write_file", Arguments: `{"path":"README.md","content":"# demo"}`}}},
	}
	meta := kernel.SessionMeta{ID: "06h06p6rta3zzj1h", Title: "list the files", Model: "gpt-test", Status: kernel.StatusAwaitingApproval,
		Created: at(0), Updated: at(11), LastSeq: 7, Runs: 2, Turns: 3,
		Usage: kernel.Usage{InputTokens: 1200, OutputTokens: 80, CachedInputTokens: 512}, CostUSD: 0.0042,
		Labels: map[string]string{"team": "infra"}}
	pending := &kernel.Approval{ID: "a1", SessionID: meta.ID, Call: msgs[6].ToolCalls[0],
		Args: json.RawMessage(`{"path":"README.md","content":"# demo"}`), RuleID: "writes-need-approval",
		Message: "writes need approval", DecisionID: "d1", Created: at(11), Expires: at(11).Add(24 * time.Hour)}
	return meta, msgs, pending
}

func storeFixture(t *testing.T, s *Store) {
	t.Helper()
	meta, msgs, pending := fixture()
	ctx := context.Background()
	steps := []kernel.Step{{Messages: msgs[:1]}, {Messages: msgs[1:2]}, {Messages: msgs[2:4]}, {Messages: msgs[4:5]},
		{Messages: msgs[5:6]}, {Messages: msgs[6:7], Pending: pending}}
	for _, st := range steps {
		st.Meta = meta
		if err := s.Commit(ctx, meta.ID, st); err != nil {
			t.Fatal(err)
		}
	}
}

func exportSchema(t *testing.T) *schema.Schema {
	t.Helper()
	sch, err := schema.Embedded("session-export.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func validateLines(t *testing.T, sch *schema.Schema, export []byte) {
	t.Helper()
	for i, line := range bytes.Split(bytes.TrimSuffix(export, []byte("\n")), []byte("\n")) {
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("line %d is not JSON: %v", i+1, err)
		}
		if err := sch.Validate(v); err != nil {
			t.Fatalf("line %d does not match schemas/session-export.schema.json: %v", i+1, err)
		}
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (go test -update rewrites it):\n got %s\nwant %s", path, got, want)
	}
}

// TestExportImport: the export matches the golden file and the schema;
// importing it into another store gives the same session, which exports
// to the same bytes.
func TestExportImport(t *testing.T) {
	ctx := context.Background()
	src := openTest(t, Options{})
	storeFixture(t, src)
	meta, msgs, pending := fixture()
	var out bytes.Buffer
	if err := src.Export(ctx, meta.ID, &out); err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/export.golden.jsonl", out.Bytes())
	validateLines(t, exportSchema(t), out.Bytes())

	dst := openTest(t, Options{})
	id, err := dst.Import(ctx, bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if id != meta.ID {
		t.Fatalf("Import kept id %q, want %q", id, meta.ID)
	}
	se, err := dst.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(se.Messages, msgs) || !reflect.DeepEqual(se.Meta, meta) || !reflect.DeepEqual(se.Pending, pending) {
		t.Fatalf("imported session differs:\n%+v\n%+v\n%+v", se.Meta, se.Messages, se.Pending)
	}
	var again bytes.Buffer
	if err := dst.Export(ctx, id, &again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), out.Bytes()) {
		t.Fatalf("export → import → export changed the bytes:\n%s\n%s", out.Bytes(), again.Bytes())
	}

	if _, err := dst.Import(ctx, bytes.NewReader(out.Bytes())); !errors.Is(err, kernel.ErrSessionExists) {
		t.Fatalf("second Import = %v, want kernel.ErrSessionExists", err)
	}
	if err := src.Export(ctx, "nope", &again); !errors.Is(err, kernel.ErrSessionNotFound) {
		t.Fatalf("Export(unknown) = %v", err)
	}
}

// TestImportNewID: a header without an id gets a new one.
func TestImportNewID(t *testing.T) {
	s := openTest(t, Options{})
	in := `{"type":"session","version":1,"meta":{"status":"idle","last_seq":1}}` + "\n" +
		`{"type":"message","seq":1,"role":"user","content":"hello"}`
	id, err := s.Import(context.Background(), strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if rules.CheckID(id) != nil || len(id) != 16 {
		t.Fatalf("new id %q", id)
	}
	se, err := s.Load(context.Background(), id)
	if err != nil || se.Messages[0].Content != "hello" || se.Meta.ID != id {
		t.Fatalf("Load(%s): %v %+v", id, err, se)
	}
}

// TestImportLarge imports a session larger than one transaction.
func TestImportLarge(t *testing.T) {
	ctx := context.Background()
	src := openTest(t, Options{})
	for i := range 8 {
		round := make([]kernel.Message, 25)
		for j := range round {
			round[j] = kernel.Message{Seq: uint64(i*25 + j + 1), Role: kernel.RoleUser, Content: strings.Repeat("q", 12<<10)}
		}
		if err := src.Commit(ctx, "big", kernel.Step{Messages: round, Meta: kernel.SessionMeta{Status: kernel.StatusIdle}}); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := src.Export(ctx, "big", &out); err != nil {
		t.Fatal(err)
	}
	dst := openTest(t, Options{})
	if _, err := dst.Import(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if se, err := dst.Load(ctx, "big"); err != nil || len(se.Messages) != 200 {
		t.Fatalf("Load after a large import: %v", err)
	}
}

// TestImportBad: every bad export of the format's tests
// (kernel/store/export/testdata/import) is refused by Import with the
// *export.ImportError export.Read gives, and nothing is stored.
func TestImportBad(t *testing.T) {
	files, err := filepath.Glob("../export/testdata/import/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no files in ../export/testdata/import: %v", err)
	}
	s := openTest(t, Options{})
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Import(context.Background(), bytes.NewReader(in))
			var ie *export.ImportError
			if !errors.As(err, &ie) {
				t.Fatalf("Import = %v, want an *export.ImportError", err)
			}
			want, _ := os.ReadFile(strings.TrimSuffix(f, ".jsonl") + ".err")
			if got := err.Error() + "\n"; got != string(want) {
				t.Fatalf("Import = %q, want %q", got, want)
			}
			if l, err := s.List(context.Background()); err != nil || len(l) != 0 {
				t.Fatalf("a refused import stored %d sessions (%v)", len(l), err)
			}
			if exists(t, s, msgKey("imp1", 1)) {
				t.Fatal("a refused import left a message")
			}
		})
	}
}
