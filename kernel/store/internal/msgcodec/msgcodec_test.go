package msgcodec

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

func TestMessageRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 123456789, time.UTC)
	for _, tc := range []struct {
		name string
		msg  kernel.Message
	}{
		{"empty", kernel.Message{}},
		{"user", kernel.Message{Role: kernel.RoleUser, Content: "hello", Time: t0}},
		{"assistant with calls", kernel.Message{Role: kernel.RoleAssistant, Content: "Looking.", Reasoning: "think",
			ToolCalls: []kernel.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path":"a"}`}, {ID: "c2", Name: "x.y", Arguments: `{not json`}}, Time: t0}},
		{"tool error", kernel.Message{Role: kernel.RoleTool, ToolCallID: "c1", ToolName: "read_file", Content: "error: no such file", IsError: true, Time: t0}},
		{"before 1970", kernel.Message{Role: kernel.RoleUser, Content: "old", Time: time.Date(1960, 1, 2, 3, 4, 5, 6, time.UTC)}},
		{"unicode and NUL", kernel.Message{Role: kernel.RoleUser, Content: "✓ naïve \x00 bytes \xff"}},
		{"unknown role kept", kernel.Message{Role: "developer", Content: "x"}},
		{"agent call answered", kernel.Message{Role: kernel.RoleTool, ToolCallID: "c1", ToolName: "agent.reviewer", Content: "LGTM", Model: "m",
			Child: &kernel.ChildRun{SessionID: "cabc", Agent: "reviewer", StopReason: kernel.StopCompleted, Usage: kernel.Usage{InputTokens: 10, OutputTokens: 2}, CostUSD: 0.25, Resumed: true}}},
		{"reasoning blocks", kernel.Message{Role: kernel.RoleAssistant, Reasoning: "a < b & c",
			ReasoningBlocks: []kernel.ReasoningBlock{
				{Provider: "anthropic", Index: 0, Data: []byte(`{"type":"thinking","thinking":"a < b & c\u2028","signature":"EqQBCgIYAhIM+/="}`)},
				{Provider: "anthropic", Index: 1, Data: []byte{0, 0xff, '"'}},
			},
			ToolCalls: []kernel.ToolCall{{ID: "toolu_1", Name: "read_file", Arguments: `{}`}}, Time: t0}},
		{"big", kernel.Message{Role: kernel.RoleTool, ToolCallID: "c", Content: strings.Repeat("0123456789", 100_000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Append(nil, &tc.msg)
			if len(b) > Size(&tc.msg) {
				t.Errorf("encoded %d bytes, Size said at most %d", len(b), Size(&tc.msg))
			}
			var got kernel.Message
			if err := Decode(b, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.msg) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tc.msg)
			}
		})
	}
}

// reseal replaces the checksum of a value whose payload was edited, so
// the decoder's structural checks (not the checksum) must catch it.
func reseal(b []byte) []byte {
	b = append([]byte(nil), b[:len(b)-4]...)
	return Seal(b, 0)
}

func TestDecodeBadMessages(t *testing.T) {
	good := Append(nil, &kernel.Message{Role: kernel.RoleAssistant, Content: "hello",
		ToolCalls: []kernel.ToolCall{{ID: "c1", Name: "n", Arguments: "{}"}}, Time: time.Unix(1, 0)})
	flipped := append([]byte(nil), good...)
	flipped[5] ^= 0x20
	for _, tc := range []struct {
		name string
		val  []byte
		want string
	}{
		{"empty", nil, "cut short"},
		{"four bytes", good[:4], "cut short"},
		{"truncated", good[:len(good)-3], "checksum mismatch"},
		{"bit flip", flipped, "checksum mismatch"},
		{"newer version", reseal(append([]byte{9}, good[1:]...)), "unknown encoding version 9"},
		{"payload cut, checksum redone", reseal(good[:len(good)-8]), "cut short"},
		{"trailing bytes", reseal(append(append([]byte(nil), good[:len(good)-4]...), 0, 0, 0, 0, 0)), "unexpected bytes"},
		{"unknown flags", reseal([]byte{1, 0, 0x80, 0x01, 0, 0, 0, 0, 0, 0, 0, 0}), "unknown message flags"},
		{"huge string", reseal(binary.AppendUvarint([]byte{1}, 1<<40)), "cut short"},
		{"varint overflow", reseal([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0}), "overflows"},
		{"bad nanoseconds", reseal([]byte{1, 0, FlagHasTime, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0, 0, 0, 0}), "nanoseconds"},
		{"too many calls", reseal([]byte{1, 0, 0, 0, 0, 0, 0, 0x7f, 0, 0, 0, 0}), "tool calls"},
		{"too many blocks", reseal([]byte{1, 0, FlagHasBlocks, 0, 0, 0, 0, 0, 0x7f, 0, 0, 0, 0}), "reasoning blocks"},
		{"block index", reseal([]byte{1, 0, FlagHasBlocks, 0, 0, 0, 0, 0, 1, 0, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 0}), "index"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m kernel.Message
			err := Decode(tc.val, &m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decode = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add(Append(nil, &kernel.Message{Role: kernel.RoleUser, Content: "hi", Time: time.Unix(5, 6)}))
	f.Add(Append(nil, &kernel.Message{Role: kernel.RoleAssistant, ToolCalls: []kernel.ToolCall{{ID: "a", Name: "b", Arguments: "c"}}}))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0})
	f.Add(Append(nil, &kernel.Message{Role: kernel.RoleAssistant, ReasoningBlocks: []kernel.ReasoningBlock{{Provider: "anthropic", Index: 2, Data: []byte("{}")}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		// The checksum rejects nearly every random input; reseal it so the
		// fuzzer reaches the structural decoder too.
		for _, v := range [][]byte{b, reseal(append(b, 0, 0, 0, 0))} {
			var m kernel.Message
			if err := Decode(v, &m); err != nil {
				continue
			}
			again := Append(nil, &m)
			var m2 kernel.Message
			if err := Decode(again, &m2); err != nil || !reflect.DeepEqual(m, m2) {
				t.Fatalf("a decoded message does not round-trip: %+v / %+v, %v", m, m2, err)
			}
		}
	})
}
