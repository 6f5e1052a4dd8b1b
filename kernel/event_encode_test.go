package kernel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"testing"
	"time"
)

// referenceMarshalEvent is MarshalEvent as it was before the per-type
// encoders: encoding/json over the struct (with event_json.go's
// MarshalJSON methods), "type" spliced in front. AgentEvent's nested event
// is rendered by the reference too, so that the two never share code.
func referenceMarshalEvent(e Event) ([]byte, error) {
	var b []byte
	var err error
	if ae, ok := e.(AgentEvent); ok {
		var inner json.RawMessage = []byte("null")
		if ae.Event != nil {
			if inner, err = referenceMarshalEvent(ae.Event); err != nil {
				// As encoding/json reports AgentEvent.MarshalJSON's error.
				return nil, &json.MarshalerError{Type: reflect.TypeOf(ae), Err: err}
			}
		}
		type plain AgentEvent
		b, err = json.Marshal(struct {
			plain
			Event json.RawMessage `json:"event"`
		}{plain(ae), inner})
	} else {
		b, err = json.Marshal(e)
	}
	if err != nil {
		return nil, err
	}
	t := e.Type()
	out := make([]byte, 0, len(b)+len(t)+12)
	out = append(out, `{"type":"`...)
	out = append(out, t...)
	out = append(out, '"')
	if len(b) > 2 {
		out = append(out, ',')
	}
	return append(out, b[1:]...), nil
}

// trickyStrings are what JSON encoders get wrong.
var trickyStrings = []string{
	"", "a", "plain text", "<script>&amp;</script>", "quote \" backslash \\ slash /",
	"\n\r\t\b\f\x00\x01\x1f\x7f", "line\u2028sep\u2029para", "bad utf8 \xff\xfe \xc3", "\xe2\x80",
	"µs é 日本語 🙂", "\u00a0\ufeff", "ok\xed\xa0\x80surrogate", "sk-ant-secret-key-0123456789",
}

var trickyFloats = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.1, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 1.5e21, -2.5e-9,
	123.456, 5e-324, math.MaxFloat64, 0.000123, 1e-100, 3e300,
}

type filler struct {
	r     *rand.Rand
	extra string // a fuzzer's string, among the tricky ones
	nan   bool   // whether NaN/Inf may appear
}

func (f *filler) str() string {
	switch f.r.Intn(4) {
	case 0:
		return ""
	case 1:
		if f.extra != "" {
			return f.extra
		}
		fallthrough
	case 2:
		return trickyStrings[f.r.Intn(len(trickyStrings))]
	}
	b := make([]byte, f.r.Intn(12))
	for i := range b {
		b[i] = byte(f.r.Intn(256))
	}
	return string(b)
}

func (f *filler) fill(v reflect.Value, depth int) {
	r := f.r
	switch t := v.Type(); {
	case t == reflect.TypeOf(time.Time{}):
		if r.Intn(3) > 0 {
			v.Set(reflect.ValueOf(time.Unix(r.Int63n(4e9), r.Int63n(1e9)).In(time.FixedZone("X", 3600*(r.Intn(5)-2)))))
		}
		return
	case t == reflect.TypeOf(json.RawMessage{}):
		raws := []string{"", `{}`, `{"a": 1, "b":"<x>"}`, `[1, 2.5e-7, "\u2028"]`, `"s&t"`, `null`}
		if s := raws[r.Intn(len(raws))]; s != "" {
			v.SetBytes([]byte(s))
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(f.str())
	case reflect.Bool:
		v.SetBool(r.Intn(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		switch r.Intn(3) {
		case 0:
		case 1:
			v.SetInt(int64(r.Intn(100)))
		default:
			n := r.Int63() >> uint(r.Intn(63))
			if r.Intn(2) == 0 {
				n = -n
			}
			if v.OverflowInt(n) {
				n = int64(int8(n))
			}
			v.SetInt(n)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if r.Intn(3) > 0 {
			n := r.Uint64() >> uint(r.Intn(64))
			if v.OverflowUint(n) {
				n = uint64(uint8(n))
			}
			v.SetUint(n)
		}
	case reflect.Float32, reflect.Float64:
		x := trickyFloats[r.Intn(len(trickyFloats))]
		switch r.Intn(4) {
		case 0:
			x = r.NormFloat64() * math.Pow(10, float64(r.Intn(60)-30))
		case 1:
			if f.nan && r.Intn(8) == 0 {
				x = []float64{math.NaN(), math.Inf(1), math.Inf(-1)}[r.Intn(3)]
			}
		}
		v.SetFloat(x)
	case reflect.Slice:
		switch r.Intn(3) {
		case 0: // nil
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			n := 1 + r.Intn(3)
			s := reflect.MakeSlice(v.Type(), n, n)
			for i := 0; i < n; i++ {
				f.fill(s.Index(i), depth+1)
			}
			v.Set(s)
		}
	case reflect.Map:
		if r.Intn(2) == 0 {
			m := reflect.MakeMap(v.Type())
			for i := r.Intn(3); i >= 0; i-- {
				k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
				f.fill(k, depth+1)
				f.fill(e, depth+1)
				m.SetMapIndex(k, e)
			}
			v.Set(m)
		}
	case reflect.Pointer:
		if depth < 3 && r.Intn(2) == 0 {
			p := reflect.New(v.Type().Elem())
			f.fill(p.Elem(), depth+1)
			v.Set(p)
		}
	case reflect.Interface:
		if v.Type() == reflect.TypeOf((*Event)(nil)).Elem() && depth < 3 && r.Intn(4) > 0 {
			v.Set(reflect.ValueOf(f.event(eventKinds[r.Intn(len(eventKinds))], depth+1)))
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i), depth+1)
			}
		}
	default:
		panic(fmt.Sprintf("filler: no rule for %s", v.Type()))
	}
}

// event returns a value of kind's type with random fields.
func (f *filler) event(kind Event, depth int) Event {
	v := reflect.New(reflect.TypeOf(kind)).Elem()
	f.fill(v, depth)
	return v.Interface().(Event)
}

func checkEncoding(t *testing.T, e Event) {
	t.Helper()
	want, wantErr := referenceMarshalEvent(e)
	got, gotErr := MarshalEvent(e)
	if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
		t.Fatalf("%s %#v:\nerror %v\nwant  %v", e.Type(), e, gotErr, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s %#v:\ngot  %s\nwant %s", e.Type(), e, got, want)
	}
	// AppendEvent appends after what b holds.
	if wantErr == nil {
		got, _ := AppendEvent([]byte("prefix"), e)
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("%s: AppendEvent gives %s", e.Type(), got)
		}
	}
}

// TestEventEncodersMatchEncodingJSON holds every event type's encoder to
// encoding/json's rendering, byte for byte: the zero value, every field
// set to what encoders get wrong (escaping, floats, omitempty, nil and
// empty slices, nested structs, raw JSON, nested events) at random, and
// encoding/json's error for what JSON cannot carry. A type added to the
// closed list without an encoder fails here.
func TestEventEncodersMatchEncodingJSON(t *testing.T) {
	f := &filler{r: rand.New(rand.NewSource(45)), nan: true}
	for _, kind := range eventKinds {
		t.Run(kind.Type(), func(t *testing.T) {
			if _, err := MarshalEvent(kind); err != nil {
				t.Fatalf("zero %T: %v", kind, err)
			}
			checkEncoding(t, kind)
			for i := 0; i < 400; i++ {
				checkEncoding(t, f.event(kind, 0))
			}
		})
	}
}

// FuzzEventEncoding: random events of every type, built from the fuzzer's
// seed and string, encode as encoding/json encodes them.
func FuzzEventEncoding(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(int64(len(s)), s)
	}
	f.Fuzz(func(t *testing.T, seed int64, s string) {
		fl := &filler{r: rand.New(rand.NewSource(seed)), extra: s, nan: seed%5 == 0}
		for _, kind := range eventKinds {
			checkEncoding(t, fl.event(kind, 0))
		}
	})
}

// runEvents are the events of a one-tool run, as BenchmarkRunLatency's
// scripted model produces them.
func runEvents() []Event {
	usage := Usage{InputTokens: 1234, OutputTokens: 56}
	call := ToolCall{ID: "call_1", Name: "read_file", Arguments: `{"path":"notes/todo.md"}`}
	return []Event{
		RunStarted{SessionID: "sess_01HZX3", Model: "scripted", Prompt: "read the notes and summarise them", MaxTurns: 8},
		TurnStarted{Turn: 1, MaxTurns: 8},
		ModelRequest{Turn: 1, MaxTurns: 8, Messages: 2, Tools: []string{"read_file", "search"}, Progress: "[1/8] calling model"},
		MessageCompleted{Turn: 1, Message: Message{Seq: 3, Role: "assistant", ToolCalls: []ToolCall{call}}, Usage: usage, CostUSD: 0.000321, Duration: 1200 * time.Microsecond},
		ToolStarted{Turn: 1, CallID: "call_1", Tool: "read_file", Args: call.Arguments, Progress: "[1/8] running tools: read_file"},
		PolicyDecided{CallID: "call_1", Tool: "read_file", Decision: Decision{ID: "dec_1", Effect: "allow", Rules: []string{"read-notes"}, EvalTime: 3 * time.Microsecond}},
		ToolCompleted{CallID: "call_1", Tool: "read_file", Outcome: "ok", Bytes: 512, Duration: 150 * time.Microsecond},
		TurnStarted{Turn: 2, MaxTurns: 8},
		ModelRequest{Turn: 2, MaxTurns: 8, Messages: 4, Tools: []string{"read_file", "search"}, Progress: "[2/8] calling model"},
		MessageDelta{Text: "The notes say "},
		MessageDelta{Text: "three things <in short>."},
		MessageCompleted{Turn: 2, Message: Message{Seq: 5, Role: "assistant", Content: "The notes say three things <in short>."}, Usage: usage, CostUSD: 0.000402, Duration: 900 * time.Microsecond},
		HookCompleted{Hook: "audit", Phase: "run_end", Turn: 2, Outcome: "allowed", Duration: 20 * time.Microsecond},
		RunCompleted{SessionID: "sess_01HZX3", StopReason: "end_turn", Output: "The notes say three things <in short>.", Usage: usage.Add(usage), CostUSD: 0.000723, Turns: 2, Duration: 3 * time.Millisecond},
	}
}

// BenchmarkMarshalEvent encodes a run's events (runEvents) per op: the
// per-type encoders (MarshalEvent) beside encoding/json (the reference,
// what MarshalEvent did before).
func BenchmarkMarshalEvent(b *testing.B) {
	events := runEvents()
	for _, c := range []struct {
		name string
		enc  func(Event) ([]byte, error)
	}{{"encoders", MarshalEvent}, {"encoding-json", referenceMarshalEvent}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, e := range events {
					if _, err := c.enc(e); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
