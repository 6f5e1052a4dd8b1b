package hooks

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
)

// sampleInputs has an input of every lifecycle point with every field
// set, as the kernel fills them.
func sampleInputs() map[kernel.HookPoint]PointInput {
	st := &kernel.State{SessionID: "s", Run: 2, Turn: 3}
	info := func(p kernel.HookPoint) kernel.PointInfo {
		pi := kernel.NewPointInfo(p, st, nil)
		pi.Principal = "alice"
		pi.Hooks.RunStart = kernel.PointVerdict{Changed: true, Hooks: []string{"pii"}}
		return pi
	}
	answer := kernel.Message{Seq: 0, Role: kernel.RoleAssistant, Content: "c", Reasoning: "r", Model: "m",
		ToolCalls: []kernel.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path":"a"}`}}}
	return map[kernel.HookPoint]PointInput{
		kernel.PointRunStart:      &kernel.RunStartInput{PointInfo: info(kernel.PointRunStart), Prompt: "p", NewSession: true},
		kernel.PointBeforeCompact: &kernel.BeforeCompactInput{PointInfo: info(kernel.PointBeforeCompact), Forced: true, Messages: 9, Tokens: 900, Window: 1000},
		kernel.PointBeforeModel: &kernel.BeforeModelInput{PointInfo: info(kernel.PointBeforeModel), Model: "m", Tools: []string{"read_file"},
			Tokens: 10, Window: 100, Budgets: []string{"cost"}, Messages: []kernel.Message{{Role: kernel.RoleSystem, Content: "sys"},
				{Seq: 1, Role: kernel.RoleUser, Content: "u"}, {Seq: 2, Role: kernel.RoleAssistant, ToolCalls: answer.ToolCalls},
				{Seq: 3, Role: kernel.RoleTool, ToolCallID: "c1", ToolName: "read_file", Content: "x"}}},
		kernel.PointAfterModel: &kernel.AfterModelInput{PointInfo: info(kernel.PointAfterModel), Model: "m", Answer: answer},
		kernel.PointRunEnd: &kernel.RunEndInput{PointInfo: info(kernel.PointRunEnd), StopReason: kernel.StopCompleted, Output: "o",
			Calls: []kernel.CallOutcome{{Tool: "read_file", Outcome: kernel.OutcomeOK}}, Continuations: 1, MaxContinuations: 3},
	}
}

// jsonFields lists the JSON fields of a struct type, embedded structs'
// flattened, and which are always written (no omitempty).
func jsonFields(rt reflect.Type) (fields, required []string) {
	for i := range rt.NumField() {
		f := rt.Field(i)
		if f.Anonymous {
			fs, rs := jsonFields(f.Type)
			fields, required = append(fields, fs...), append(required, rs...)
			continue
		}
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fields = append(fields, name)
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	return fields, required
}

// TestPointInputSchemas holds schemas/hook-input.schema.json to the
// kernel's inputs: every lifecycle point has its $defs entry, whose
// properties are the envelope (version, hook; concurrent at
// before_model) and the point's input's JSON fields, required unless
// omitempty; the document a hook reads validates against the schema.
func TestPointInputSchemas(t *testing.T) {
	defs := inputDefs(t)
	s, err := inputSchema()
	if err != nil {
		t.Fatal(err)
	}
	inputs := sampleInputs()
	for _, p := range lifecycle() {
		in, ok := inputs[p]
		if !ok {
			t.Errorf("no sample input of %s in sampleInputs", p)
			continue
		}
		fields, required := jsonFields(reflect.TypeOf(in).Elem())
		fields, required = append([]string{"version", "hook"}, fields...), append([]string{"version", "hook"}, required...)
		if p == kernel.PointBeforeModel {
			fields = append(fields, "concurrent")
		}
		def, ok := defs[string(p)]
		if !ok {
			t.Errorf("schemas/hook-input.schema.json has no $defs entry for %s", p)
			continue
		}
		props := slices.Sorted(maps.Keys(def.Properties))
		if !slices.Equal(props, slices.Sorted(slices.Values(fields))) || !slices.Equal(slices.Sorted(slices.Values(def.Required)), slices.Sorted(slices.Values(required))) {
			t.Errorf("schemas/hook-input.schema.json#/$defs/%s has %v, requiring %v; the kernel's %T writes %v, always %v",
				p, props, def.Required, in, fields, required)
		}
		doc, err := PointDocument("h", in, p == kernel.PointBeforeModel)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := decodeJSON(doc)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(inst); err != nil {
			t.Errorf("%s: the document a hook reads does not match the schema: %v\n%s", p, err, doc)
		}
	}
}

// TestPointReplySchemas holds each lifecycle point's reply schema to
// ReplyFields and to what a Go hook may answer there: a field the point
// takes is accepted, one of another point refused.
func TestPointReplySchemas(t *testing.T) {
	raw, err := os.ReadFile("../schemas/hook-output.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var sch struct {
		Defs map[string]schemaDef `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &sch); err != nil {
		t.Fatal(err)
	}
	samples := map[string]string{
		"reason": `"r"`, "prompt": `"p"`, "context": `"c"`, "edits": `[{"seq":1,"content":"x"}]`, "text": `"t"`,
		"reasoning": `"r"`, "refuse": `[{"call_id":"c1","reason":"no"}]`, "note": `"n"`, "instructions": `"i"`,
	}
	all, _ := jsonFields(reflect.TypeFor[Reply]())
	for _, p := range lifecycle() {
		def, ok := sch.Defs[string(p)]
		if !ok {
			t.Errorf("schemas/hook-output.schema.json has no $defs entry for %s", p)
			continue
		}
		want := ReplyFields(p)
		if got := slices.Sorted(maps.Keys(def.Properties)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
			t.Errorf("schemas/hook-output.schema.json#/$defs/%s has %v; ReplyFields(%s) is %v", p, got, p, want)
		}
		for _, f := range all {
			if f == "decision" {
				continue
			}
			doc := `{"decision":"allow","` + f + `":` + samples[f] + `}`
			rep, err := ParseReply(p, []byte(doc))
			if slices.Contains(want, f) {
				if err != nil {
					t.Errorf("%s refuses %s: %v", p, doc, err)
				} else if err := rep.check(p); err != nil {
					t.Errorf("%s: a reply the schema accepts is refused by Reply.check: %v", p, err)
				}
				continue
			}
			if err == nil {
				t.Errorf("%s accepts %s, which it does not take", p, doc)
			}
			if err := (&Reply{Note: "x", Text: new(string), Prompt: new(string)}).check(p); err == nil && p != kernel.PointRunEnd {
				t.Errorf("%s: Reply.check accepts fields of other points", p)
			}
		}
	}
}
