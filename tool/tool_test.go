package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/agentkernel/agentkernel/tool"
)

func TestErrorsKeepTheirCode(t *testing.T) {
	cause := errors.New("disk")
	err := fmt.Errorf("reading: %w", tool.Errorf(tool.CodeNotFound, "no file %s: %w", "a", cause))
	if tool.CodeOf(err) != tool.CodeNotFound {
		t.Errorf("code = %s", tool.CodeOf(err))
	}
	if !errors.Is(err, &tool.Error{Code: tool.CodeNotFound}) || errors.Is(err, &tool.Error{Code: tool.CodeTimeout}) {
		t.Error("errors.Is does not match by code")
	}
	if !errors.Is(err, cause) {
		t.Error("the cause is lost")
	}
	if tool.CodeOf(errors.New("x")) != tool.CodeToolError || tool.CodeOf(nil) != tool.CodeToolError {
		t.Error("a plain error is not tool_error")
	}
	if (&tool.Error{Code: "c"}).Error() != "c" {
		t.Error("an error without a message reads as its code")
	}
}

func TestFuncToolAndProgress(t *testing.T) {
	var got []string
	ctx := tool.WithProgress(context.Background(), func(s string) { got = append(got, s) })
	tl := tool.New(tool.Spec{Name: "t", Tier: tool.TierReadOnly}, func(ctx context.Context, args json.RawMessage) (tool.Result, error) {
		tool.ReportProgress(ctx, "half")
		return tool.Result{Content: string(args)}, nil
	})
	res, err := tl.Call(ctx, json.RawMessage(`{}`))
	if err != nil || res.Content != "{}" || len(got) != 1 || got[0] != "half" || tl.Spec().Name != "t" {
		t.Errorf("Call = %+v, %v; progress %v", res, err, got)
	}
	tool.ReportProgress(context.Background(), "nobody listens") // must not panic
	for tier, ok := range map[tool.Tier]bool{tool.TierReadOnly: true, tool.TierSideEffecting: true, tool.TierPrivileged: true, "": false, "admin": false} {
		if tier.Valid() != ok {
			t.Errorf("%q.Valid() = %v", tier, !ok)
		}
	}
}

// reporterCtx answers ProgressKey itself, as the kernel's call contexts do.
type reporterCtx struct {
	context.Context
	got []string
}

func (c *reporterCtx) Value(key any) any {
	if _, ok := key.(tool.ProgressKey); ok {
		return c
	}
	return c.Context.Value(key)
}

func (c *reporterCtx) ReportProgress(text string) { c.got = append(c.got, text) }

func TestProgressReporterFromValue(t *testing.T) {
	rc := &reporterCtx{Context: context.Background()}
	derived, cancel := context.WithCancel(rc) // found through a derived context too
	defer cancel()
	tool.ReportProgress(derived, "a")
	tool.ReportProgress(rc, "b")
	if len(rc.got) != 2 || rc.got[0] != "a" || rc.got[1] != "b" {
		t.Errorf("reports = %q, want [a b]", rc.got)
	}
}
