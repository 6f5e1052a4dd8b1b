package policy_test

import (
	"context"
	"fmt"
	"os"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/policy"
)

func Example() {
	src := `
name: example
revision: "1"
defaults:
  tool_call: allow
rules:
  - id: no-force-push
    effect: deny
    tools: [run_command]
    when: call.command matches ` + "`git\\s+push\\s+.*--force`" + `
    message: '"force push refused: " + call.command'
tests:
  - name: force push is denied
    input:
      call: {tool: run_command, args: {argv: [git, push, --force]}}
    expect: {decision: deny, rules: [no-force-push]}
`
	p, err := policy.Load(context.Background(), "example.yaml", []byte(src), policy.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	spec := policy.BuiltinSpecs()[5] // run_command: its argv becomes call.command
	st := &kernel.State{Run: 1, Turn: 1}
	for _, argv := range []string{`["git","push","--force","origin"]`, `["git","status"]`} {
		call, err := kernel.NewCall("c1", spec, []byte(`{"argv":`+argv+`}`), st)
		if err != nil {
			fmt.Println(err)
			return
		}
		d := p.Decide(context.Background(), st, call)
		fmt.Printf("%s %v: %s\n", d.Effect, d.Rules, d.Message)
	}
	rep, _ := p.RunTests(context.Background())
	_ = rep.Format(os.Stdout, false)
	// Output:
	// deny [no-force-push]: force push refused: git push --force origin
	// allow []: no rule matched; the default is allow
	// ok  	example.yaml	1 tests
}

func ExampleLoad_error() {
	src := "name: typo\nrevision: \"1\"\ndefaults: {tool_call: allow}\nrules:\n  - id: shell\n    effect: deny\n    when: tool.nmae == \"run_command\"\n"
	_, err := policy.Load(context.Background(), "typo.yaml", []byte(src), policy.Options{})
	fmt.Println(err)
	// Output:
	// policy typo.yaml: 1 problem
	// typo.yaml:7:16: rule "shell": when: tool has no field nmae (fields: name, tier, source, tags)
	//         when: tool.nmae == "run_command"
	//                    ^
}
