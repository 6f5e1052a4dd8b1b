// Command conformance is the Go conformance plugin: the tool set every
// SDK's conformance plugin serves (sdk/README.md lists it), run by the
// conformance suite (sdktest.Conformance) through the real host, like the
// TypeScript and Python ones.
//
// Build: go build -o conformance ./sdk/sdktest/testdata/conformance
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/sdk"
)

type textArgs struct {
	Text string `json:"text"`
}

type pathArgs struct {
	Path string `json:"path"`
}

type failArgs struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type countArgs struct {
	Count int `json:"count"`
}

type bytesArgs struct {
	Bytes int `json:"bytes"`
}

type dialArgs struct {
	Address string `json:"address"`
	Network string `json:"network"`
}

type empty struct{}

const (
	textSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`
	pathSchema = `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`
)

func main() {
	sdk.Plugin{Tools: tools(), Hooks: hooks()}.Serve()
}

// hooks are the conformance hooks (sdktest, conformance_hooks.go).
func hooks() []*sdk.Hook {
	return []*sdk.Hook{
		sdk.NewHook("conformance", "Blocks BLOCK-ME, counts messages, shouts answers, denies deny.",
			[]string{"before_model", "after_model", "before"}, conformanceHook),
		sdk.NewHook("conformance_fail", "Always fails.", []string{"run_end"},
			func(context.Context, sdk.HookInput) (sdk.HookReply, error) {
				return sdk.HookReply{}, sdk.Errorf("hook_broken", "broken on purpose")
			}),
		sdk.NewHook("conformance_hang", "Answers only when its call ends, then writes stopped to the file the request's last message names.",
			[]string{"before_model"}, hangHook),
		sdk.NewHook("conformance_garbage", "Answers with a field its point does not take.", []string{"after_model"},
			func(context.Context, sdk.HookInput) (sdk.HookReply, error) {
				return sdk.HookReply{Note: "a run_end field"}, nil
			}),
	}
}

// hangHook never answers: once its call ends it writes "stopped" to the
// file the request's last message names, and returns.
func hangHook(ctx context.Context, in sdk.HookInput) (sdk.HookReply, error) {
	var doc struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	if err := in.Decode(&doc); err != nil || len(doc.Messages) == 0 {
		return sdk.HookReply{}, fmt.Errorf("no messages: %v", err)
	}
	<-ctx.Done()
	return sdk.HookReply{}, os.WriteFile(doc.Messages[len(doc.Messages)-1].Content, []byte("stopped"), 0o600)
}

func conformanceHook(_ context.Context, in sdk.HookInput) (sdk.HookReply, error) {
	var doc struct {
		Messages []struct{ Content string } `json:"messages"`
		Answer   struct{ Content string }   `json:"answer"`
		Args     map[string]any             `json:"args"`
	}
	if err := in.Decode(&doc); err != nil {
		return sdk.HookReply{}, err
	}
	switch in.Point {
	case "before_model":
		for _, m := range doc.Messages {
			if strings.Contains(m.Content, "BLOCK-ME") {
				return sdk.Block("conformance: blocked"), nil
			}
		}
		return sdk.HookReply{Context: fmt.Sprintf("conformance: seen %d messages", len(doc.Messages))}, nil
	case "after_model":
		text := strings.ToUpper(doc.Answer.Content)
		return sdk.HookReply{Text: &text}, nil
	}
	if _, deny := doc.Args["deny"]; deny {
		return sdk.Block("conformance: denied"), nil
	}
	return sdk.HookReply{AdditionalContext: "conformance"}, nil
}

func tools() []*sdk.Tool {
	return []*sdk.Tool{
		sdk.Text(sdk.Spec{Name: "echo", Description: "Returns its text.", Schema: textSchema, Tier: sdk.ReadOnly},
			func(_ context.Context, a textArgs) (string, error) { return a.Text, nil }),
		sdk.Text(sdk.Spec{Name: "fail", Description: "Fails with a code.", Tier: sdk.ReadOnly,
			Schema: `{"type":"object","required":["code","message"]}`},
			func(_ context.Context, a failArgs) (string, error) { return "", sdk.Errorf(a.Code, "%s", a.Message) }),
		sdk.Text(sdk.Spec{Name: "progress", Description: "Reports progress count times.", Tier: sdk.ReadOnly,
			Schema: `{"type":"object","properties":{"count":{"type":"integer","minimum":1}},"required":["count"]}`},
			func(ctx context.Context, a countArgs) (string, error) {
				for i := 1; i <= a.Count; i++ {
					sdk.Progressf(ctx, "step %d/%d", i, a.Count)
				}
				return "done", nil
			}),
		sdk.Text(sdk.Spec{Name: "block", Description: "Reports progress, then waits until its call ends; writes why to path.", Schema: pathSchema, Tier: sdk.ReadOnly},
			func(ctx context.Context, a pathArgs) (string, error) {
				sdk.Progress(ctx, "blocking")
				<-ctx.Done()
				reason := sdk.CodeCancelled
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					reason = sdk.CodeTimeout
				}
				_ = os.WriteFile(a.Path, []byte("stopped: "+reason), 0o600)
				return "", ctx.Err()
			}),
		sdk.Text(sdk.Spec{Name: "big", Description: "Returns that many bytes.", Tier: sdk.ReadOnly,
			Schema: `{"type":"object","properties":{"bytes":{"type":"integer","minimum":0}},"required":["bytes"]}`},
			func(_ context.Context, a bytesArgs) (string, error) { return strings.Repeat("x", a.Bytes), nil }),
		sdk.Text(sdk.Spec{Name: "mark", Description: `Writes "marked" to path.`, Schema: pathSchema, Tier: sdk.SideEffecting,
			CheckSideEffect: func(_ context.Context, raw json.RawMessage, _ time.Time) (sdk.SideEffect, string) {
				var a pathArgs
				if json.Unmarshal(raw, &a) != nil {
					return sdk.SideEffectUnknown, ""
				}
				b, err := os.ReadFile(a.Path)
				switch {
				case err == nil && string(b) == "marked":
					return sdk.SideEffectCompleted, a.Path + " has the mark"
				case errors.Is(err, fs.ErrNotExist):
					return sdk.SideEffectNotRun, a.Path + " does not exist"
				}
				return sdk.SideEffectUnknown, ""
			}},
			func(_ context.Context, a pathArgs) (string, error) {
				return "marked", os.WriteFile(a.Path, []byte("marked"), 0o600)
			}),
		sdk.Text(sdk.Spec{Name: "crash", Description: "Panics outside the call's handling: the process dies.", Schema: textSchema, Tier: sdk.ReadOnly},
			func(ctx context.Context, a textArgs) (string, error) {
				go func() { panic(a.Text) }()
				<-ctx.Done()
				return "", ctx.Err()
			}),
		sdk.Text(sdk.Spec{Name: "ignore", Description: "Reports progress, then never answers, ignoring its context.", Tier: sdk.ReadOnly},
			func(ctx context.Context, _ empty) (string, error) {
				sdk.Progress(ctx, "ignoring")
				select {}
			}),
		sdk.Text(sdk.Spec{Name: "noop", Description: "Does nothing.", Tier: sdk.ReadOnly},
			func(context.Context, empty) (string, error) { return "", nil }),
		// The sandbox's attack tools: each reports what it managed.
		sdk.Text(sdk.Spec{Name: "read", Description: "Reads a file.", Schema: pathSchema, Tier: sdk.ReadOnly},
			func(_ context.Context, a pathArgs) (string, error) {
				b, err := os.ReadFile(a.Path)
				if err != nil {
					return "", sdk.Errorf(sdk.CodePermissionDenied, "%v", err)
				}
				return string(b), nil
			}),
		sdk.Text(sdk.Spec{Name: "dial", Description: "Connects to an address.", Tier: sdk.ReadOnly,
			Schema: `{"type":"object","properties":{"network":{"type":"string"},"address":{"type":"string"}},"required":["network","address"]}`},
			func(ctx context.Context, a dialArgs) (string, error) {
				c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, a.Network, a.Address)
				if err != nil {
					return "", sdk.Errorf(sdk.CodePermissionDenied, "%v", err)
				}
				defer c.Close()
				return fmt.Sprintf("connected to %s", c.RemoteAddr()), nil
			}),
	}
}
