package toolproto

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// decodeChunks streams text in the chunks cut at the given positions and
// returns the answer and everything shown on the way.
func decodeChunks(c *Codec, text string, cuts []int, cfg DecoderConfig) (Answer, string) {
	d := c.NewDecoder(cfg)
	var shown strings.Builder
	emit := func(s string) { shown.WriteString(s) }
	at := 0
	for _, cut := range cuts {
		d.Write(text[at:cut], emit)
		at = cut
	}
	d.Write(text[at:], emit)
	return d.Close(emit), shown.String()
}

// FuzzDecode checks that no input panics the decoders, that any split of
// the stream into chunks gives the same answer, and that what was shown
// is exactly the answer's text.
func FuzzDecode(f *testing.F) {
	seeds := []string{
		"plain text < and > and {braces}",
		"Let me look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>",
		"<tool_call>{\"name\":\"a\"}</tool_call><tool_call>{\"name\":\"b\",\"arguments\":\"{}\"}</tool_call>",
		"<tool_call><tool_call>x</tool_call>",
		"<tool_call>{\"name\":\"a\"}</tool_call> done <tool_response>x</tool_response>",
		"<tool_ca<tool_call>{}</tool_cal</tool_call>",
		"ok\n{\"name\": \"a\", \"parameters\": {\"s\": \"}\\\"{\"}}; {\"name\": \"b\", \"arguments\": {}}\n",
		"```json\n{\"name\": \"a\", \"parameters\": {}}\n```\n<|python_tag|>{\"tool_result\": 1}",
		"{\"a\": [1, {\"b\": \"}\"}]}\n``` x\n{unclosed",
	}
	for i, s := range seeds {
		f.Add(s, uint64(i))
	}
	codecs := []*Codec{mustCodec(f, Hermes), mustCodec(f, JSON)}
	f.Fuzz(func(t *testing.T, text string, seed uint64) {
		if len(text) > 1<<16 {
			return
		}
		cfg := DecoderConfig{MaxCalls: 4, MaxCallBytes: 256, Offered: func(n string) bool { return n != "nope" }}
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		var cuts []int
		for at := 0; at < len(text); {
			at += 1 + rng.IntN(8)
			if at < len(text) {
				cuts = append(cuts, at)
			}
		}
		bytewise := make([]int, 0, len(text))
		for i := 1; i < len(text); i++ {
			bytewise = append(bytewise, i)
		}
		for _, c := range codecs {
			whole, shownWhole := decodeChunks(c, text, nil, cfg)
			for _, split := range [][]int{cuts, bytewise} {
				a, shown := decodeChunks(c, text, split, cfg)
				if !reflect.DeepEqual(a, whole) {
					t.Fatalf("%s: chunked %v\n got %+v (violation %v)\nwant %+v (violation %v)", c.Name(), split, a, a.Violation, whole, whole.Violation)
				}
				if shown != a.Text {
					t.Fatalf("%s: shown %q, answer text %q", c.Name(), shown, a.Text)
				}
			}
			if shownWhole != whole.Text {
				t.Fatalf("%s: shown %q, answer text %q", c.Name(), shownWhole, whole.Text)
			}
			if whole.Violation == nil && len(whole.Calls) > cfg.MaxCalls {
				t.Fatalf("%s: %d calls, more than the limit", c.Name(), len(whole.Calls))
			}
			if whole.Violation != nil && whole.Calls != nil {
				t.Fatalf("%s: calls with a violation", c.Name())
			}
			if len(whole.Calls) > 0 && !whole.Attempted {
				t.Fatalf("%s: calls but not attempted", c.Name())
			}
		}
	})
}
