package sdk_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/sdk"
)

// A tool is a typed function plus a spec. In main, hand every tool to
// sdk.Serve; a Tool is also a kernel.Tool, so it can be called directly,
// with the same argument validation the served tool applies.
func ExampleText() {
	type args struct {
		Text string `json:"text"`
	}
	upper := sdk.Text(sdk.Spec{
		Name:        "upper",
		Description: "Returns the text in upper case.",
		Schema:      `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`,
		Tier:        sdk.ReadOnly,
	}, func(ctx context.Context, a args) (string, error) {
		sdk.Progress(ctx, "shouting")
		return strings.ToUpper(a.Text), nil
	})
	// In a plugin's main: sdk.Serve(upper)

	res, err := upper.Call(context.Background(), []byte(`{"text":"hello"}`))
	fmt.Println(res.Content, err)
	_, err = upper.Call(context.Background(), []byte(`{"text":42}`))
	fmt.Println(sdk.CodeOf(err))
	// Output:
	// HELLO <nil>
	// invalid_args
}
