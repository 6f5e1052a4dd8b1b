package sdk_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/sdk"
)

// A hook's reply documents: nothing allows, a block, a change with the
// decision filled in. (The conformance suite runs hooks through the
// kernel's host; this is the document step alone.)
func TestHookReplies(t *testing.T) {
	ctx := context.Background()
	h := sdk.NewHook("guard", "", []string{"before_model", "run_end"}, func(_ context.Context, in sdk.HookInput) (sdk.HookReply, error) {
		var doc struct{ Messages []struct{ Content string } }
		if err := in.Decode(&doc); err != nil {
			return sdk.HookReply{}, err
		}
		switch {
		case in.Point == "run_end":
			return sdk.HookReply{Note: "ended in session " + in.SessionID}, nil
		case len(doc.Messages) > 0 && doc.Messages[0].Content == "BLOCK":
			return sdk.Block("no"), nil
		case len(doc.Messages) > 0 && doc.Messages[0].Content == "panic":
			panic("the hook broke")
		}
		return sdk.HookReply{}, nil
	})
	for _, c := range []struct{ input, want string }{
		{`{"phase":"before_model","messages":[{"content":"hi"}]}`, ``},
		{`{"phase":"before_model","messages":[{"content":"BLOCK"}]}`, `{"decision":"block","reason":"no"}`},
		{`{"phase":"run_end","session_id":"s1"}`, `{"decision":"allow","note":"ended in session s1"}`},
	} {
		got, err := h.Run(ctx, []byte(c.input))
		if err != nil || string(got) != c.want {
			t.Errorf("%s: %s, %v; want %s", c.input, got, err, c.want)
		}
	}
	for _, c := range []struct{ input, code, says string }{
		{`{"phase":"after_model"}`, sdk.CodeInvalidArgs, `does not run at "after_model"`},
		{`[1]`, sdk.CodeInvalidArgs, "not a JSON object"},
		{`{"phase":"before_model","messages":[{"content":"panic"}]}`, sdk.CodePanic, "the hook broke"},
	} {
		_, err := h.Run(ctx, []byte(c.input))
		if !errors.Is(err, &sdk.Error{Code: c.code}) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want code %s saying %q", c.input, err, c.code, c.says)
		}
	}
}

// A bad hook is refused naming it and what is wrong.
func TestBadHooksAreRefused(t *testing.T) {
	fn := func(context.Context, sdk.HookInput) (sdk.HookReply, error) { return sdk.HookReply{}, nil }
	for _, c := range []struct {
		hook *sdk.Hook
		says string
	}{
		{sdk.NewHook("a b", "", []string{"before"}, fn), "hook name"},
		{sdk.NewHook("g", "", nil, fn), "hook g: no points"},
		{sdk.NewHook("g", "", []string{"before_tool"}, fn), `hook g: "before_tool" is not a hook point`},
		{sdk.NewHook("g", "", []string{"before"}, nil), "hook g: no function"},
	} {
		_, err := c.hook.Run(context.Background(), []byte(`{"phase":"before"}`))
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v; want %q", err, c.says)
		}
	}
}
