package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// A kernel with one tool: the model calls it, reads the result and answers.
func Example() {
	upper := kernel.NewTool(kernel.ToolSpec{
		Name:        "upper",
		Description: "Upper-case a text.",
		Tier:        kernel.TierReadOnly,
		Source:      "example",
		Schema:      json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	}, func(_ context.Context, args json.RawMessage) (kernel.Result, error) {
		var a struct{ Text string }
		if err := json.Unmarshal(args, &a); err != nil {
			return kernel.Result{}, err
		}
		return kernel.Result{Content: strings.ToUpper(a.Text)}, nil
	})
	tools := kernel.NewRegistry()
	if err := tools.Register(upper); err != nil {
		panic(err)
	}
	model := kerneltest.NewProvider(
		kerneltest.Calls("upper", map[string]any{"text": "hello"}),
		kerneltest.Text("The tool says HELLO."),
	)
	k, err := kernel.New(kernel.Config{Provider: model, Store: memory.New(), Tools: tools,
		OnEvent: func(e kernel.Event) {
			if c, ok := e.(kernel.ToolCompleted); ok {
				fmt.Println("tool:", c.Tool, c.Outcome)
			}
		}})
	if err != nil {
		panic(err)
	}
	res, err := k.Run(context.Background(), "", "shout hello")
	if err != nil {
		panic(err)
	}
	fmt.Println(res.StopReason, res.Turns, res.Output)
	// Output:
	// tool: upper ok
	// completed 2 The tool says HELLO.
}
