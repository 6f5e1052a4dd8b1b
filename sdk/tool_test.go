package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/sdk"
	"github.com/agentkernel/agentkernel/sdk/sdktest"
)

type greetArgs struct {
	Name  string `json:"name"`
	Times int    `json:"times"`
}

const greetSchema = `{
	"type": "object",
	"properties": {
		"name": {"type": "string", "minLength": 1},
		"times": {"type": "integer", "minimum": 1, "maximum": 3}
	},
	"required": ["name"],
	"additionalProperties": false
}`

func greet() *sdk.Tool {
	return sdk.Text(sdk.Spec{Name: "greet", Description: "Greets.", Schema: greetSchema, Tier: sdk.ReadOnly, Tags: []string{"demo"}},
		func(_ context.Context, a greetArgs) (string, error) {
			return strings.Repeat("hello "+a.Name+"\n", max(a.Times, 1)), nil
		})
}

type stats struct {
	Words int `json:"words"`
}

func count() *sdk.Tool {
	return sdk.JSON(sdk.Spec{Name: "count", Tier: sdk.ReadOnly,
		Schema: `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`},
		func(_ context.Context, a struct {
			Text string `json:"text"`
		}) (stats, error) {
			return stats{Words: len(strings.Fields(a.Text))}, nil
		})
}

func TestTypedTools(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		tool     *sdk.Tool
		args     string
		want     string
		wantCode string
		wantText string
	}{
		{"text", greet(), `{"name":"ada","times":2}`, "hello ada\nhello ada\n", "", ""},
		{"json", count(), `{"text":"a b c"}`, `{"words":3}`, "", ""},
		{"empty args are an object", sdk.Text(sdk.Spec{Name: "n", Tier: sdk.ReadOnly}, func(context.Context, struct{}) (string, error) { return "ok", nil }), ``, "ok", "", ""},
		{"schema: missing field", greet(), `{}`, "", sdk.CodeInvalidArgs, "missing properties: 'name'"},
		{"schema: wrong type", greet(), `{"name":"x","times":"2"}`, "", sdk.CodeInvalidArgs, "/times"},
		{"schema: extra field", greet(), `{"name":"x","shout":true}`, "", sdk.CodeInvalidArgs, "shout"},
		{"not an object", greet(), `[1]`, "", sdk.CodeInvalidArgs, "JSON object"},
		{"not JSON", greet(), `{`, "", sdk.CodeInvalidArgs, "not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Through sdktest: the arguments are validated as the kernel
			// validates them before a call reaches the plugin.
			res, err := sdktest.Start(t, tc.tool).Call(ctx, tc.tool.Spec().Name, tc.args)
			if tc.wantCode == "" {
				if err != nil || res.Content != tc.want {
					t.Fatalf("Call = %q, %v; want %q", res.Content, err, tc.want)
				}
				return
			}
			if sdk.CodeOf(err) != tc.wantCode || !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("err = %v (code %s), want code %s mentioning %q", err, sdk.CodeOf(err), tc.wantCode, tc.wantText)
			}
		})
	}
}

// TestDirectCallChecksOnlyTheObject: a Tool called directly (not through
// the kernel or sdktest) decodes the arguments but does not check the
// schema, which would need a JSON Schema library in every plugin binary.
func TestDirectCallChecksOnlyTheObject(t *testing.T) {
	ctx := context.Background()
	if res, err := greet().Call(ctx, []byte(`{"name":"x","shout":true}`)); err != nil || res.Content != "hello x\n" {
		t.Errorf("extra field, called directly = %q, %v; the schema is the kernel's to check", res.Content, err)
	}
	for _, args := range []string{`[1]`, `{`, `"x"`} {
		if _, err := greet().Call(ctx, []byte(args)); sdk.CodeOf(err) != sdk.CodeInvalidArgs {
			t.Errorf("Call(%s) = %v, want code %s", args, err, sdk.CodeInvalidArgs)
		}
	}
	if _, err := greet().Call(ctx, []byte(`{"name":7}`)); sdk.CodeOf(err) != sdk.CodeInvalidArgs {
		t.Errorf("undecodable args: %v, want code %s", err, sdk.CodeInvalidArgs)
	}
}

func TestSpecIsAKernelSpec(t *testing.T) {
	s := greet().Spec()
	if s.Name != "greet" || s.Tier != kernel.TierReadOnly || s.Source != "sdk" || len(s.Tags) != 1 {
		t.Errorf("spec = %+v", s)
	}
	if _, err := kernel.CompileSchema(s.Name, s.Schema); err != nil {
		t.Errorf("schema: %v", err)
	}
}

func TestBadSpecs(t *testing.T) {
	h := func(context.Context, struct{}) (string, error) { return "", nil }
	for _, tc := range []struct {
		name string
		spec sdk.Spec
		want string
	}{
		{"name with a dot", sdk.Spec{Name: "a.b", Tier: sdk.ReadOnly}, "tool name"},
		{"no tier", sdk.Spec{Name: "a"}, "tier"},
		{"array schema", sdk.Spec{Name: "a", Tier: sdk.ReadOnly, Schema: `{"type":"array"}`}, "schema"},
		{"broken schema", sdk.Spec{Name: "a", Tier: sdk.ReadOnly, Schema: `{"type":`}, "schema"},
		{"negative timeout", sdk.Spec{Name: "a", Tier: sdk.ReadOnly, Timeout: -time.Second}, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := sdk.Text(tc.spec, h)
			if _, err := tool.Call(context.Background(), nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Call: %v, want an error about %s", err, tc.want)
			}
			if err := sdk.Register(nopRegistrar{}, tool); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Register: %v, want an error about %s", err, tc.want)
			}
		})
	}
	t.Run("duplicates and emptiness", func(t *testing.T) {
		if err := sdk.Register(nopRegistrar{}, greet(), greet()); err == nil || !strings.Contains(err.Error(), "defined twice") {
			t.Errorf("duplicate: %v", err)
		}
		if err := sdk.Register(nopRegistrar{}); err == nil {
			t.Error("no tools accepted")
		}
	})
}

func TestPanicIsRecovered(t *testing.T) {
	tool := sdk.Text(sdk.Spec{Name: "p", Tier: sdk.ReadOnly}, func(context.Context, struct{}) (string, error) {
		var m map[string]int
		m["x"] = 1 // nil map write
		return "", nil
	})
	_, err := tool.Call(context.Background(), nil)
	if !errors.Is(err, sdk.ErrPanic) {
		t.Fatalf("err = %v, want ErrPanic", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "panic: assignment to entry in nil map") {
		t.Errorf("message %q does not start with the panic value", msg)
	}
	if strings.Contains(msg, "runtime/debug.Stack") || !strings.Contains(msg, "tool_test.go") {
		t.Errorf("stack should start at the panicking frame: %q", msg)
	}
}

func TestTimeoutAndCancellation(t *testing.T) {
	wait := func(ctx context.Context, _ struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}
	tool := sdk.Text(sdk.Spec{Name: "w", Tier: sdk.ReadOnly, Timeout: 20 * time.Millisecond}, wait)
	if _, err := tool.Call(context.Background(), nil); !errors.Is(err, sdk.ErrTimeout) {
		t.Errorf("spec timeout: %v, want ErrTimeout", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sdk.Text(sdk.Spec{Name: "w", Tier: sdk.ReadOnly}, wait).Call(ctx, nil); !errors.Is(err, sdk.ErrCancelled) {
		t.Errorf("cancelled: %v, want ErrCancelled", err)
	}
}

func TestErrors(t *testing.T) {
	err := sdk.Errorf(sdk.CodeNotFound, "file %s: %w", "a.txt", context.DeadlineExceeded)
	for _, tc := range []struct {
		target error
		want   bool
	}{
		{sdk.ErrNotFound, true},
		{&sdk.Error{Code: sdk.CodeNotFound, Message: "other text"}, true},
		{sdk.ErrPermissionDenied, false},
		{context.DeadlineExceeded, true},
	} {
		if got := errors.Is(err, tc.target); got != tc.want {
			t.Errorf("errors.Is(%v, %v) = %v", err, tc.target, got)
		}
	}
	if err.Error() != "file a.txt: context deadline exceeded" {
		t.Errorf("message = %q", err)
	}
	if sdk.CodeOf(errors.New("plain")) != sdk.CodeToolError || sdk.CodeOf(err) != sdk.CodeNotFound {
		t.Error("CodeOf")
	}
}

func TestTruncateOutput(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abc", 10, "0123456789" + sdk.TruncationMarker(13, 10)},
		{"ééééé", 5, "éé" + sdk.TruncationMarker(10, 5)}, // never splits a rune
		{"anything", 0, "anything"},
	} {
		if got := sdk.TruncateOutput(tc.in, tc.max); got != tc.want {
			t.Errorf("TruncateOutput(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

// TestInProcess runs tools through the real gRPC service in-process.
func TestInProcess(t *testing.T) {
	slow := sdk.Text(sdk.Spec{Name: "slow", Tier: sdk.ReadOnly}, func(ctx context.Context, _ struct{}) (string, error) {
		for i := 1; i <= 3; i++ {
			sdk.Progressf(ctx, "%d/3", i)
		}
		return "done", nil
	})
	fail := sdk.Text(sdk.Spec{Name: "fail", Tier: sdk.ReadOnly}, func(context.Context, struct{}) (string, error) {
		return "", sdk.Errorf(sdk.CodePermissionDenied, "no access to %s", "/etc/shadow")
	})
	p := sdktest.Start(t, greet(), count(), slow, fail)
	if len(p.Specs()) != 4 {
		t.Fatalf("specs = %+v", p.Specs())
	}
	ctx := context.Background()
	if res, err := p.Call(ctx, "count", `{"text":"one two"}`); err != nil || res.Content != `{"words":2}` {
		t.Errorf("count = %q, %v", res.Content, err)
	}
	res, progress, err := p.CallProgress(ctx, "slow", `{}`)
	if err != nil || res.Content != "done" || strings.Join(progress, " ") != "1/3 2/3 3/3" {
		t.Errorf("slow = %q %v %v", res.Content, progress, err)
	}
	_, err = p.Call(ctx, "fail", `{}`)
	var te *kernel.ToolError
	if !errors.As(err, &te) || te.Code != sdk.CodePermissionDenied || !errors.Is(err, sdk.ErrPermissionDenied) {
		t.Errorf("fail: %#v", err)
	}
	if _, err := p.Call(ctx, "greet", `{"name":""}`); !errors.Is(err, sdk.ErrInvalidArgs) {
		t.Errorf("invalid args: %v", err)
	}
	if _, err := p.Call(ctx, "nope", `{}`); !errors.Is(err, kernel.ErrUnknownTool) {
		t.Errorf("unknown tool: %v", err)
	}
}

// fatalTB records the first Fatalf instead of failing the test.
type fatalTB struct {
	*testing.T
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestKernelRefusesWhatTheSDKCannotCheck: a schema that is a JSON object
// but not a valid JSON Schema passes the SDK's own check (it links no
// schema compiler); sdktest, like the kernel loading the plugin, refuses it
// and names the tool.
func TestKernelRefusesWhatTheSDKCannotCheck(t *testing.T) {
	bad := sdk.Text(sdk.Spec{Name: "bad", Tier: sdk.ReadOnly, Schema: `{"type":"object","properties":{"n":{"type":"nope"}}}`},
		func(context.Context, struct{}) (string, error) { return "ran", nil })
	if err := sdk.Register(nopRegistrar{}, bad); err != nil {
		t.Fatalf("the SDK cannot judge the schema, yet refused it: %v", err)
	}
	ftb := &fatalTB{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sdktest.Start(ftb, bad)
	}()
	<-done
	if !strings.Contains(ftb.msg, `register tool "bad"`) || !strings.Contains(ftb.msg, "invalid schema") {
		t.Fatalf("sdktest.Start: %q, want the kernel's refusal naming the tool", ftb.msg)
	}
}

// TestCheckSideEffect: a tool's CheckSideEffect is its answer about an
// interrupted call; without one, with arguments that are not an object, or
// when the check panics, the answer is unknown.
func TestCheckSideEffect(t *testing.T) {
	ctx := context.Background()
	var since time.Time
	checked := sdk.NewTool(sdk.Spec{Name: "w", Tier: sdk.SideEffecting,
		CheckSideEffect: func(_ context.Context, args json.RawMessage, s time.Time) (sdk.SideEffect, string) {
			since = s
			return sdk.SideEffectCompleted, "saw " + string(args)
		}}, func(context.Context, json.RawMessage) (sdk.Result, error) { return sdk.Result{}, nil })
	at := time.Unix(1700000000, 0)
	if e, d := checked.CheckSideEffect(ctx, json.RawMessage(`{"a":1}`), at); e != sdk.SideEffectCompleted || d != `saw {"a":1}` || !since.Equal(at) {
		t.Fatalf("check = %v %q (since %v)", e, d, since)
	}
	if e, _ := checked.CheckSideEffect(ctx, json.RawMessage(`[1]`), at); e != sdk.SideEffectUnknown {
		t.Fatalf("non-object arguments: %v", e)
	}
	var _ kernel.SideEffectChecker = checked
	plain := sdk.NewTool(sdk.Spec{Name: "p", Tier: sdk.ReadOnly}, func(context.Context, json.RawMessage) (sdk.Result, error) { return sdk.Result{}, nil })
	if e, d := plain.CheckSideEffect(ctx, json.RawMessage(`{}`), at); e != sdk.SideEffectUnknown || d != "" {
		t.Fatalf("no check: %v %q", e, d)
	}
	panicky := sdk.NewTool(sdk.Spec{Name: "x", Tier: sdk.SideEffecting,
		CheckSideEffect: func(context.Context, json.RawMessage, time.Time) (sdk.SideEffect, string) { panic("boom") }},
		func(context.Context, json.RawMessage) (sdk.Result, error) { return sdk.Result{}, nil })
	if e, d := panicky.CheckSideEffect(ctx, json.RawMessage(`{}`), at); e != sdk.SideEffectUnknown || !strings.Contains(d, "panicked: boom") {
		t.Fatalf("panicking check: %v %q", e, d)
	}
}
