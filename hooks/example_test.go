package hooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/hooks"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// A Go before hook that vetoes a call, around a real kernel run.
func ExampleBefore() {
	noRm := hooks.Before("no-rm", func(_ context.Context, c *kernel.Call) (hooks.Verdict, error) {
		if text, _ := c.Value()["text"].(string); strings.HasPrefix(text, "rm ") {
			return hooks.Verdict{Block: true, Reason: "deleting files is not allowed"}, nil
		}
		return hooks.Verdict{}, nil
	})
	tools := kernel.NewRegistry()
	if err := tools.Register(kerneltest.EchoTool("shell")); err != nil {
		panic(err)
	}
	provider := kerneltest.NewProvider(
		kerneltest.Calls("shell", map[string]any{"text": "rm -rf /"}),
		kerneltest.Text("I may not delete files."),
	)
	k, err := kernel.New(kernel.Config{Provider: provider, Store: memory.New(), Tools: tools, Hooks: []kernel.Hook{noRm}})
	if err != nil {
		panic(err)
	}
	res, err := k.Run(context.Background(), "", "clean up")
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Calls[0].Outcome)
	fmt.Println(res.Calls[0].Error)
	// Output:
	// blocked
	// tool shell: blocked by hook "no-rm": deleting files is not allowed
}

// The hooks: section of kernel.yaml as a Chain: the scrubber (on by
// default) and a declarative hook.
func ExampleChain() {
	const section = `
rules:
  - name: no-dotenv
    phase: before
    block_when: args.text endsWith ".env"
    message: .env files are off limits
`
	var cfg hooks.Config
	if err := yaml.Unmarshal([]byte(section), &cfg); err != nil {
		panic(err)
	}
	chain, err := hooks.NewChain(cfg, hooks.Options{})
	if err != nil {
		panic(err)
	}
	readFile := kernel.NewTool(kernel.ToolSpec{
		Name: "read_file", Description: "Read a file.", Tier: kernel.TierReadOnly, Source: "builtin",
		Schema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	}, func(context.Context, json.RawMessage) (kernel.Result, error) {
		return kernel.Result{Content: "db_password: Sup3r-S3cret-9\n"}, nil
	})
	tools := kernel.NewRegistry()
	if err := tools.Register(readFile); err != nil {
		panic(err)
	}
	provider := kerneltest.NewProvider(
		kerneltest.Calls("read_file", map[string]any{"text": "config.yaml"}, "read_file", map[string]any{"text": "prod.env"}),
		kerneltest.Text("done"),
	)
	k, err := kernel.New(kernel.Config{Provider: provider, Store: memory.New(), Tools: tools, Hooks: []kernel.Hook{chain.Hook()}})
	if err != nil {
		panic(err)
	}
	if _, err := k.Run(context.Background(), "", "read the config"); err != nil {
		panic(err)
	}
	reqs := provider.Requests()
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == kernel.RoleTool {
			fmt.Printf("%q\n", m.Content)
		}
	}
	// Output:
	// "db_password: [REDACTED]\n"
	// "blocked by hook \"no-dotenv\": .env files are off limits"
}

func ExampleScrubber() {
	s, err := hooks.NewScrubber(hooks.ScrubberConfig{})
	if err != nil {
		panic(err)
	}
	out, n := s.Scrub("curl -H 'Authorization: Bearer 9f8XqL2mZr7KvT4w' https://api.example.com # key AKIA6PYCDYBK155OXTZ7")
	fmt.Println(n, out)
	// Output:
	// 2 curl -H 'Authorization: Bearer [REDACTED]' https://api.example.com # key [REDACTED]
}
