package toolproto

import (
	"reflect"
	"strings"
	"testing"
)

func mustCodec(t testing.TB, name string) *Codec {
	t.Helper()
	c, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// offered offers the tools named.
func offered(names ...string) DecoderConfig {
	return DecoderConfig{Offered: func(n string) bool {
		for _, x := range names {
			if x == n {
				return true
			}
		}
		return false
	}}
}

func TestDecode(t *testing.T) {
	cfg := offered("read_file", "git.log", "search")
	tests := []struct {
		name, format, in string
		text             string
		calls            []Call
		kind             Kind
		attempted        bool
	}{
		{name: "hermes/plain", format: Hermes, in: "Just an answer: 2 < 3 and <b>bold</b>.", text: "Just an answer: 2 < 3 and <b>bold</b>."},
		{name: "hermes/one call", format: Hermes, in: "Let me look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>",
			text: "Let me look.\n", calls: []Call{{"read_file", `{"path": "a.txt"}`}}, attempted: true},
		{name: "hermes/parallel", format: Hermes, in: "<tool_call>{\"name\":\"read_file\",\"arguments\":{\"path\":\"a\"}}</tool_call>\n<tool_call>\n{\"name\": \"git.log\", \"arguments\": \"{\\\"n\\\": 2}\"}\n</tool_call>\n",
			calls: []Call{{"read_file", `{"path":"a"}`}, {"git.log", `{"n": 2}`}}, attempted: true},
		{name: "hermes/parameters and no args", format: Hermes, in: `<tool_call>{"name":"search","parameters":{"q":1}}</tool_call><tool_call>{"name":"read_file"}</tool_call>`,
			calls: []Call{{"search", `{"q":1}`}, {"read_file", `{}`}}, attempted: true},
		{name: "hermes/malformed json", format: Hermes, in: "ok <tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": }</tool_call>", text: "ok ", kind: MalformedCall, attempted: true},
		{name: "hermes/args not object", format: Hermes, in: `<tool_call>{"name": "read_file", "arguments": [1]}</tool_call>`, kind: MalformedCall, attempted: true},
		{name: "hermes/unknown tool", format: Hermes, in: `<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>`, kind: UnknownTool, attempted: true},
		{name: "hermes/fabricated result", format: Hermes, in: "Reading.\n<tool_call>{\"name\":\"read_file\",\"arguments\":{}}</tool_call>\n<tool_response>\nhello\n</tool_response>\nThe file says hello.",
			text: "Reading.\n", kind: FabricatedResult, attempted: true},
		{name: "hermes/fabricated alone", format: Hermes, in: "<tool_response id=\"x\">fake</tool_response>", kind: FabricatedResult},
		{name: "hermes/prose after call", format: Hermes, in: "<tool_call>{\"name\":\"read_file\",\"arguments\":{}}</tool_call>\n\nThe file says hello.", kind: ProseAfterCall, attempted: true},
		{name: "hermes/whitespace after call", format: Hermes, in: "<tool_call>{\"name\":\"read_file\",\"arguments\":{}}</tool_call>\n\n  \n", calls: []Call{{"read_file", "{}"}}, attempted: true},
		{name: "hermes/unclosed", format: Hermes, in: "Reading <tool_call>{\"name\":\"read_file\"", text: "Reading ", kind: MalformedCall, attempted: true},
		{name: "hermes/nested", format: Hermes, in: "<tool_call><tool_call>{\"name\":\"read_file\"}</tool_call></tool_call>", kind: MalformedCall, attempted: true},
		{name: "hermes/partial tag at end is text", format: Hermes, in: "a <tool_ca", text: "a <tool_ca"},
		{name: "hermes/near tags are text", format: Hermes, in: "<tool_calls> <tool_responses> <<tool_x> </tool_call>", text: "<tool_calls> <tool_responses> <<tool_x> </tool_call>"},
		{name: "hermes/empty call", format: Hermes, in: "<tool_call> </tool_call>", kind: MalformedCall, attempted: true},

		{name: "json/plain", format: JSON, in: "The answer is {x}.\n{not json}\n", text: "The answer is {x}.\n{not json}\n"},
		{name: "json/one call", format: JSON, in: "Looking.\n{\"name\": \"read_file\", \"parameters\": {\"path\": \"a}b\\\"\"}}",
			text: "Looking.\n", calls: []Call{{"read_file", `{"path": "a}b\""}`}}, attempted: true},
		{name: "json/python tag and parallel", format: JSON, in: "<|python_tag|>{\"name\": \"read_file\", \"parameters\": {}}; {\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}\n  {\"type\": \"function\", \"name\": \"git.log\", \"parameters\": {}}\n",
			calls: []Call{{"read_file", "{}"}, {"search", `{"q": "x"}`}, {"git.log", "{}"}}, attempted: true},
		{name: "json/fenced", format: JSON, in: "```json\n{\"name\": \"read_file\", \"parameters\": {\"path\": \"a\"}}\n```\n",
			calls: []Call{{"read_file", `{"path": "a"}`}}, attempted: true},
		{name: "json/fenced text block", format: JSON, in: "```json\n{\"a\": 1}\n```\n", text: "```json\n{\"a\": 1}\n```\n"},
		{name: "json/object that is not a call", format: JSON, in: "{\"name\": \"Bob\", \"age\": 3}\nok", text: "{\"name\": \"Bob\", \"age\": 3}\nok"},
		{name: "json/mid-line object is text", format: JSON, in: `Use {"name": "read_file", "parameters": {}} like this.`, text: `Use {"name": "read_file", "parameters": {}} like this.`},
		{name: "json/malformed", format: JSON, in: "{\"name\": \"read_file\", \"parameters\": {\"path\": }}", kind: MalformedCall, attempted: true},
		{name: "json/unclosed", format: JSON, in: "{\"name\": \"read_file\", \"parameters\": {\"path\": \"a\"", kind: MalformedCall, attempted: true},
		{name: "json/unknown", format: JSON, in: `{"name": "nope", "parameters": {}}`, kind: UnknownTool, attempted: true},
		{name: "json/fabricated", format: JSON, in: "{\"name\": \"read_file\", \"parameters\": {}}\n{\"tool_result\": {\"id\": \"c1\", \"content\": \"hi\"}}", kind: FabricatedResult, attempted: true},
		{name: "json/prose after", format: JSON, in: "{\"name\": \"read_file\", \"parameters\": {}}\nThe file says hi.", kind: ProseAfterCall, attempted: true},
		{name: "json/unclosed non-call is text", format: JSON, in: "{ just a brace", text: "{ just a brace"},
		{name: "json/partial python tag is text", format: JSON, in: "<|pyth", text: "<|pyth"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := mustCodec(t, tc.format).Parse(tc.in, cfg)
			if a.Text != tc.text {
				t.Errorf("text = %q, want %q", a.Text, tc.text)
			}
			if !reflect.DeepEqual(a.Calls, tc.calls) {
				t.Errorf("calls = %#v, want %#v", a.Calls, tc.calls)
			}
			var kind Kind
			if a.Violation != nil {
				kind = a.Violation.Kind
			}
			if kind != tc.kind {
				t.Errorf("violation = %v, want %q", a.Violation, tc.kind)
			}
			if a.Attempted != tc.attempted {
				t.Errorf("attempted = %v, want %v", a.Attempted, tc.attempted)
			}
		})
	}
}

// TestStreamingHoldsPartialTags checks what the user sees while the answer
// streams: text before a call as it comes, never a piece of a tag.
func TestStreamingHoldsPartialTags(t *testing.T) {
	for _, f := range []struct {
		format string
		chunks []string
		seen   []string
	}{
		{Hermes, []string{"Let me ", "look. <to", "ol_ca", "ll>{\"name\":\"read_file\"}</tool", "_call>", "\n"}, []string{"Let me ", "look. ", "", "", "", ""}},
		{Hermes, []string{"a <to", "day> b"}, []string{"a ", "<today> b"}},
		{JSON, []string{"Sure.\n", "{\"name\": \"read_", "file\", \"parameters\": {}}"}, []string{"Sure.\n", "", ""}},
		{JSON, []string{"x\n{\"a\":", " 1} y"}, []string{"x\n", "{\"a\": 1} y"}},
	} {
		d := mustCodec(t, f.format).NewDecoder(DecoderConfig{})
		for i, ch := range f.chunks {
			var got strings.Builder
			d.Write(ch, func(s string) { got.WriteString(s) })
			if got.String() != f.seen[i] {
				t.Errorf("%s chunk %d %q: shown %q, want %q", f.format, i, ch, got.String(), f.seen[i])
			}
		}
		d.Close(func(s string) { t.Errorf("%s: shown at close: %q", f.format, s) })
	}
}

func TestBounds(t *testing.T) {
	for _, format := range Formats() {
		c := mustCodec(t, format)
		one := c.FormatCalls("", []Call{{"read_file", `{"path":"a"}`}})
		t.Run(format+"/10000 calls", func(t *testing.T) {
			a := c.Parse(strings.Repeat(one+"\n", 10000), DecoderConfig{})
			if a.Violation == nil || a.Violation.Kind != TooManyCalls || a.Violation.Call != DefaultMaxCalls+1 {
				t.Fatalf("violation = %v, want too_many_calls at call %d", a.Violation, DefaultMaxCalls+1)
			}
		})
		t.Run(format+"/megabytes in one call", func(t *testing.T) {
			big := c.FormatCalls("", []Call{{"read_file", `{"path":"` + strings.Repeat("x", 3<<20) + `"}`}})
			d := c.NewDecoder(DecoderConfig{})
			for len(big) > 0 { // as a server streams it
				n := min(len(big), 4096)
				d.Write(big[:n], nil)
				big = big[n:]
			}
			a := d.Close(nil)
			if a.Violation == nil || a.Violation.Kind != CallTooLarge {
				t.Fatalf("violation = %v, want call_too_large", a.Violation)
			}
			if sc, ok := d.sc.(*hermesScanner); ok && cap(sc.body) > 2*DefaultMaxCallBytes {
				t.Errorf("the decoder held %d bytes", cap(sc.body))
			}
			if sc, ok := d.sc.(*jsonScanner); ok && cap(sc.body) > 2*DefaultMaxCallBytes {
				t.Errorf("the decoder held %d bytes", cap(sc.body))
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	calls := []Call{{"read_file", `{"path":"a.txt"}`}, {"git.log", `{"max_count":5}`}}
	for _, format := range Formats() {
		c := mustCodec(t, format)
		a := c.Parse(c.FormatCalls("Looking first.", calls), DecoderConfig{})
		if a.Violation != nil || !reflect.DeepEqual(a.Calls, calls) || a.Text != "Looking first.\n" {
			t.Errorf("%s: %+v", format, a)
		}
		res := c.FormatResults([]Result{{ID: "c1", Name: "read_file", Content: "x </tool_response> y"}, {ID: "c2", Name: "git.log", Content: "boom", IsError: true}})
		if !c.IsResults(res) {
			t.Errorf("%s: IsResults(%q) = false", format, res)
		}
		if format == Hermes && strings.Count(res, "</tool_response>") != 2 {
			t.Errorf("hermes: a result closed its block early: %q", res)
		}
		// A result block in an answer is a fabricated result.
		if a := c.Parse(res, DecoderConfig{}); a.Violation == nil || a.Violation.Kind != FabricatedResult {
			t.Errorf("%s: results parsed as an answer: %+v", format, a)
		}
	}
}

func TestLookup(t *testing.T) {
	if c, err := Lookup(""); err != nil || c.Name() != Hermes {
		t.Errorf("Lookup(\"\") = %v, %v", c, err)
	}
	if _, err := Lookup("xml"); err == nil || !strings.Contains(err.Error(), "hermes or json") {
		t.Errorf("Lookup(xml) = %v", err)
	}
}
