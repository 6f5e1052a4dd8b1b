package kernel

import (
	"strconv"
	"strings"
	"testing"
)

// TestCheckHistory: each way a history can break the pairing of calls and
// results is found, at the message it is about, and the histories the
// kernel writes (a crash's open calls, a pending approval, a steered user
// message between results) are not.
func TestCheckHistory(t *testing.T) {
	call := func(seq uint64, ids ...string) Message {
		m := Message{Seq: seq, Role: RoleAssistant}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: id, Name: "t"})
		}
		return m
	}
	result := func(seq uint64, id string) Message { return Message{Seq: seq, Role: RoleTool, ToolCallID: id} }
	user := func(seq uint64) Message { return Message{Seq: seq, Role: RoleUser, Content: "u"} }
	for _, c := range []struct {
		name    string
		msgs    []Message
		pending *Approval
		want    []string // "seq:text fragment"
	}{
		{name: "whole", msgs: []Message{user(1), call(2, "a", "b"), result(3, "b"), user(4), result(5, "a"), call(6)}},
		{name: "last calls open (a crash)", msgs: []Message{user(1), call(2, "a", "b"), result(3, "a")}},
		{name: "pending approval", msgs: []Message{user(1), call(2, "a", "b"), result(3, "a")}, pending: &Approval{Call: ToolCall{ID: "b"}}},
		{name: "result before any call", msgs: []Message{user(1), result(2, "a")}, want: []string{"2:did not make"}},
		{name: "result for another turn's call", msgs: []Message{user(1), call(2, "a"), result(3, "a"), call(4, "b"), result(5, "a"), result(6, "b")},
			want: []string{"5:did not make"}},
		{name: "two results", msgs: []Message{user(1), call(2, "a"), result(3, "a"), result(4, "a")}, want: []string{"4:a second result for call a"}},
		{name: "call left open", msgs: []Message{user(1), call(2, "a", "b"), result(3, "a"), call(4)}, want: []string{"2:call b (t) has no result"}},
		{name: "pending for an answered call", msgs: []Message{user(1), call(2, "a"), result(3, "a")}, pending: &Approval{Call: ToolCall{ID: "a"}},
			want: []string{"0:the pending approval is for call \"a\""}},
	} {
		got := CheckHistory(c.msgs, c.pending)
		if len(got) != len(c.want) {
			t.Errorf("%s: %d problems %+v, want %d", c.name, len(got), got, len(c.want))
			continue
		}
		for i, w := range c.want {
			seq, frag, _ := strings.Cut(w, ":")
			if g := got[i]; seq != strconv.FormatUint(g.Seq, 10) || !strings.Contains(g.Text, frag) {
				t.Errorf("%s: problem %d = %+v, want seq %s and %q", c.name, i, g, seq, frag)
			}
		}
	}
}
