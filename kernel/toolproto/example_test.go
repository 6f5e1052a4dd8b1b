package toolproto_test

import (
	"fmt"

	"github.com/agentkernel/agentkernel/kernel/toolproto"
)

func Example() {
	c, _ := toolproto.Lookup(toolproto.Hermes)
	d := c.NewDecoder(toolproto.DecoderConfig{Offered: func(name string) bool { return name == "read_file" }})
	show := func(s string) { fmt.Printf("shown: %q\n", s) }
	for _, chunk := range []string{"Let me read it. <tool", "_call>\n{\"name\": \"read_file\", ", "\"arguments\": {\"path\": \"README.md\"}}\n</tool_call>"} {
		d.Write(chunk, show)
	}
	a := d.Close(show)
	fmt.Printf("calls: %+v\n", a.Calls)
	fmt.Println(c.FormatResults([]toolproto.Result{{ID: "call_1", Name: "read_file", Content: "# Hello"}}))
	// Output:
	// shown: "Let me read it. "
	// calls: [{Name:read_file Arguments:{"path": "README.md"}}]
	// <tool_response id="call_1" name="read_file">
	// # Hello
	// </tool_response>
}
