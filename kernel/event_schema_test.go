package kernel_test

import (
	"encoding/json"
	"go/ast"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/schema"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/schemas"
)

// eventTypeNames lists the Go types of package kernel that implement Event
// (those with an isEvent method), read from the source so that a new event
// type cannot escape the checks below.
func eventTypeNames(t *testing.T) []string {
	t.Helper()
	_, decls := sourceDecls(t)
	var names []string
	for _, d := range decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv == nil || fd.Name.Name != "isEvent" {
			continue
		}
		if id, ok := fd.Recv.List[0].Type.(*ast.Ident); ok {
			names = append(names, id.Name)
		}
	}
	sort.Strings(names)
	return names
}

// eventSamples has one event of every type with every field set, as the
// kernel fills them.
func eventSamples() []kernel.Event {
	now := time.Date(2026, 11, 23, 10, 0, 0, 500, time.UTC)
	usage := kernel.Usage{InputTokens: 10, OutputTokens: 5, CachedInputTokens: 2, ReasoningTokens: 1}
	call := kernel.ToolCall{ID: "c1", Name: "write_file", Arguments: `{"path":"a"}`}
	dec := kernel.Decision{ID: "d1", Effect: kernel.EffectAsk, Message: "m", Rules: []string{"r"}, WouldDeny: []string{"w"},
		WouldAsk: []string{"a"}, Default: true, Revision: "1", SHA256: "ab", EvalTime: 8123 * time.Nanosecond,
		Resolved: map[string]string{"path": "link"}}
	h, ph, id, tl := "h", "before", "c1", "t"
	return []kernel.Event{
		kernel.RunStarted{SessionID: "s", Model: "m", Prompt: "p", MaxTurns: 8, NewSession: true, Resumed: true},
		kernel.TurnStarted{Turn: 1, MaxTurns: 8},
		kernel.ModelRequest{Turn: 1, MaxTurns: 8, Messages: 3, Tools: []string{"read_file"}, Progress: "[1/8] calling model"},
		kernel.ModelRequest{Turn: 1, MaxTurns: 8, Messages: 3, Progress: "[1/8] calling model"}, // no tools: null
		kernel.MessageDelta{Text: "x"},
		kernel.ReasoningDelta{Text: "x"},
		kernel.MessageCompleted{Turn: 1, Usage: usage, CostUSD: 0.01, Duration: 1500 * time.Millisecond,
			Message: kernel.Message{Seq: 2, Role: kernel.RoleAssistant, Content: "c", Reasoning: "r", ToolCalls: []kernel.ToolCall{call},
				ToolCallID: "c0", ToolName: "t", IsError: true, Time: now, Model: "m", ReasoningField: "reasoning", Failed: "f",
				Protocol: &kernel.ProtocolNote{Raw: "r", Correction: "prose_after_call"},
				Hooks: &kernel.HookRecord{Notes: []kernel.HookNote{{Hook: "pii", Point: kernel.PointAfterModel, What: kernel.NoteText, Reason: "r"}},
					Edits: []kernel.Edit{{Hook: "e", Seq: 1, Content: "c"}}}}},
		kernel.ToolStarted{Turn: 1, CallID: "c1", Tool: "t", Args: "{}", Progress: "[1/8] running tools: t"},
		kernel.ToolProgress{CallID: "c1", Tool: "t", Text: "half"},
		kernel.ToolCompleted{CallID: "c1", Tool: "t", Outcome: kernel.OutcomeError, IsError: true, Error: "e", Bytes: 3, Duration: 850 * time.Microsecond},
		kernel.PolicyDecided{CallID: "c1", Tool: "t", Decision: dec},
		kernel.ApprovalRequired{Approval: kernel.Approval{ID: "a", SessionID: "s", Call: call, Args: json.RawMessage(`{"path":"a"}`),
			RuleID: "r", Message: "m", DecisionID: "d1", Created: now, Expires: now.Add(time.Hour)}},
		kernel.ApprovalResolved{ApprovalID: "a", CallID: "c1", Tool: "t", Approved: true, Expired: true, Note: "n"},
		kernel.BudgetWarning{BudgetNotice: kernel.BudgetNotice{ID: "b", Message: "m", WrapUp: true}},
		kernel.BudgetExceeded{BudgetNotice: kernel.BudgetNotice{ID: "b", Message: "m", WrapUp: true}},
		kernel.ContextCompacted{Dropped: 1, Kept: 2, EstimatedTokens: 3, Kind: "summarised", Trimmed: 1, Through: 4, TokensBefore: 9,
			TokensAfter: 3, Model: "m", Usage: usage, CostUSD: 0.1, Duration: 2 * time.Second},
		kernel.ContextWarning{Used: 9, Window: 10, Fraction: 0.9},
		kernel.SteerDelivered{SessionID: "s", ID: "q", Seq: 5, Text: "t"},
		kernel.ProviderRetry{Attempt: 2, Delay: 3 * time.Second, Error: "e", Cause: "429", StatusCode: 429, Model: "m", Fallback: "f", Superseded: 7},
		kernel.RunCompleted{SessionID: "s", StopReason: kernel.BudgetStop("cost"), Output: "o", Usage: usage, CostUSD: 1, Turns: 2, Duration: time.Minute,
			Blocked: &kernel.Block{Hook: "g", Point: kernel.PointBeforeModel, Reason: "r", Concurrent: true}, Notes: []kernel.HookText{{Hook: "n", Text: "t"}}},
		kernel.RunCompleted{SessionID: "s", StopReason: kernel.StopGuardrail, Usage: usage, Turns: 1, Duration: time.Second},
		kernel.RunFailed{SessionID: "s", StopReason: kernel.StopError, Error: "e"},
		kernel.RunFailed{SessionID: "s", StopReason: kernel.StopToolProtocol, Error: "e"},
		kernel.HookBlocked{Hook: h, Phase: ph, CallID: id, Tool: tl, Reason: "r"},
		kernel.HookRewrote{Hook: h, Phase: "after", CallID: id, Tool: tl, What: "redacted"},
		kernel.HookFailed{Hook: h, Phase: ph, CallID: id, Tool: tl, Error: "e", FailOpen: true},
		kernel.HookBlocked{Hook: h, Phase: string(kernel.PointRunStart), Reason: "r"}, // a lifecycle point: no call
		kernel.HookCompleted{Hook: h, Phase: string(kernel.PointBeforeModel), Turn: 1, Outcome: "blocked", Duration: time.Millisecond, Concurrent: true},
		kernel.ConfigReloaded{What: "policy", Source: "p.yaml", Revision: "1", SHA256: "ab", Error: "e"},
		kernel.Notice{Source: "plugin x", Level: "warn", Text: "t"},
		kernel.AgentEvent{CallID: "c1", Agent: "reviewer", SessionID: "s2", Depth: 1, Event: kernel.AgentEvent{CallID: "c2", Agent: "tester", SessionID: "s3", Depth: 2,
			Event: kernel.ToolCompleted{CallID: "c1", Tool: "t", Outcome: kernel.OutcomeOK, Bytes: 3, Duration: time.Second}}},
		kernel.ApprovalRequired{Approval: kernel.Approval{ID: "a", SessionID: "s", Call: kernel.ToolCall{ID: "c1", Name: "agent.reviewer", Arguments: `{"task":"t"}`},
			Args: json.RawMessage(`{"task":"t"}`), Created: now, Agent: "coder",
			Child: &kernel.Approval{ID: "a2", SessionID: "s2", Call: call, Args: json.RawMessage(`{"path":"a"}`), Created: now, Agent: "reviewer"}}},
		kernel.ToolCompleted{CallID: "c1", Tool: "agent.reviewer", Outcome: kernel.OutcomeOK, Bytes: 3},
		kernel.MessageCompleted{Turn: 1, Message: kernel.Message{Seq: 3, Role: kernel.RoleTool, ToolCallID: "c1", ToolName: "agent.reviewer", Content: "ok",
			Child: &kernel.ChildRun{SessionID: "s2", Agent: "reviewer", StopReason: kernel.StopMaxDepth, Usage: usage, CostUSD: 0.1, Resumed: true}}},
	}
}

// dispatch is one entry of the schema's allOf: if type is Const, then Ref.
type dispatch struct {
	If struct {
		Properties struct {
			Type struct {
				Const string `json:"const"`
			} `json:"type"`
		} `json:"properties"`
	} `json:"if"`
	Then struct {
		Ref string `json:"$ref"`
	} `json:"then"`
}

// TestEveryEventHasASchema: schemas/events.schema.json defines every event
// type the kernel has, names it by its Type(), and lists exactly the JSON
// fields of the Go type, required where the field is not omitempty.
func TestEveryEventHasASchema(t *testing.T) {
	raw, err := schemas.FS.ReadFile("events.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			Type struct {
				Enum []string `json:"enum"`
			} `json:"type"`
		} `json:"properties"`
		AllOf []dispatch `json:"allOf"`
		Defs  map[string]struct {
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	byGoName := map[string]kernel.Event{}
	for _, e := range eventSamples() {
		byGoName[reflect.TypeOf(e).Name()] = e
	}
	goNames := eventTypeNames(t)
	if len(goNames) < 20 {
		t.Fatalf("found only %d event types in the source: %v", len(goNames), goNames)
	}
	var types []string
	for _, name := range goNames {
		e, ok := byGoName[name]
		if !ok {
			t.Errorf("event type %s has no sample in eventSamples: add one (every field set)", name)
			continue
		}
		types = append(types, e.Type())
		def, ok := doc.Defs[e.Type()]
		if !ok {
			t.Errorf("schemas/events.schema.json has no $defs/%s for %s", e.Type(), name)
			continue
		}
		fields, required := jsonFields(reflect.TypeOf(e))
		fields, required = append(fields, "type"), append(required, "type")
		var props []string
		for p := range def.Properties {
			props = append(props, p)
		}
		sort.Strings(fields)
		sort.Strings(props)
		sort.Strings(required)
		gotReq := slices.Sorted(slices.Values(def.Required))
		if !slices.Equal(fields, props) {
			t.Errorf("%s (%s): Go fields %v, schema properties %v", e.Type(), name, fields, props)
		}
		if !slices.Equal(required, gotReq) {
			t.Errorf("%s (%s): Go always writes %v, schema requires %v", e.Type(), name, required, gotReq)
		}
		if !slices.ContainsFunc(doc.AllOf, func(d dispatch) bool {
			return d.If.Properties.Type.Const == e.Type() && d.Then.Ref == "#/$defs/"+e.Type()
		}) {
			t.Errorf("%s: no if/then dispatch to $defs/%s in allOf", e.Type(), e.Type())
		}
	}
	sort.Strings(types)
	enum := slices.Sorted(slices.Values(doc.Properties.Type.Enum))
	if !slices.Equal(types, enum) {
		t.Errorf("event types %v, schema's type enum %v", types, enum)
	}
	if len(doc.AllOf) != len(types) {
		t.Errorf("%d if/then dispatches for %d event types", len(doc.AllOf), len(types))
	}
}

// jsonFields lists the JSON field names of a struct (embedded structs
// flattened), and those encoding/json always writes.
func jsonFields(rt reflect.Type) (all, required []string) {
	for i := range rt.NumField() {
		f := rt.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			a, r := jsonFields(f.Type)
			all, required = append(all, a...), append(required, r...)
			continue
		}
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		all = append(all, name)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			required = append(required, name)
		}
	}
	return all, required
}

// TestEventsMatchTheSchema: every event, fully populated, renders to JSON
// that schemas/events.schema.json accepts, with durations as strings.
func TestEventsMatchTheSchema(t *testing.T) {
	s, err := schema.Embedded("events.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range eventSamples() {
		b, err := kernel.MarshalEvent(e)
		if err != nil {
			t.Fatalf("%s: %v", e.Type(), err)
		}
		if err := s.ValidateJSON(b); err != nil {
			t.Errorf("%s does not match schemas/events.schema.json: %v\n%s", e.Type(), err, b)
		}
	}
	// Durations are strings, never nanoseconds.
	b, _ := kernel.MarshalEvent(kernel.ToolCompleted{CallID: "c", Tool: "t", Outcome: kernel.OutcomeOK, Duration: 1500 * time.Millisecond})
	if !strings.Contains(string(b), `"duration":"1.5s"`) {
		t.Errorf("duration not a string: %s", b)
	}
	b, _ = kernel.MarshalEvent(kernel.PolicyDecided{CallID: "c", Tool: "t", Decision: kernel.Decision{ID: "d", Effect: kernel.EffectAllow, EvalTime: 8 * time.Microsecond}})
	if !strings.Contains(string(b), `"eval_time":"8µs"`) {
		t.Errorf("eval_time not a string: %s", b)
	}
	// The schema rejects what the kernel does not write.
	for _, bad := range []string{
		`{"type":"tool.completed","call_id":"c","tool":"t","outcome":"ok","bytes":1,"duration":1500000000}`,
		`{"type":"run.started","session_id":"s","model":"m","max_turns":8,"surprise":1}`,
		`{"type":"no.such.event"}`,
		`{"call_id":"c"}`,
	} {
		if err := s.ValidateJSON([]byte(bad)); err == nil {
			t.Errorf("the schema accepts %s", bad)
		}
	}
}
