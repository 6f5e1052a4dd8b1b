package scripted_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/provider/scripted"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

const script = `
steps:
  - text: "Let me look."
    tool_calls:
      - name: echo
        args: {text: "README.md main.go"}
  - match: {role: tool, contains: "README.md"}
    reasoning: "the listing has a README"
    text: "There is a README."
  - text: "Second answer."
`

func TestReplayThroughTheLoop(t *testing.T) {
	s, err := scripted.Parse("test.yaml", []byte(script))
	if err != nil {
		t.Fatal(err)
	}
	store := memory.New()
	reg := kernel.NewRegistry()
	if err := reg.Register(kerneltest.EchoTool("echo")); err != nil {
		t.Fatal(err)
	}
	var deltas []string
	k, err := kernel.New(kernel.Config{Provider: scripted.New(s), Store: store, Tools: reg, OnEvent: func(e kernel.Event) {
		if d, ok := e.(kernel.MessageDelta); ok {
			deltas = append(deltas, d.Text)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(context.Background(), "", "what is here?")
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "There is a README." || res.Turns != 2 || res.Usage.InputTokens == 0 {
		t.Fatalf("result = %+v", res)
	}
	if got := strings.Join(deltas, "|"); got != "Let |me |look.|There |is |a |README." {
		t.Fatalf("deltas = %q", got)
	}
	// A second run continues the script: the step is chosen by the history.
	k2, _ := kernel.New(kernel.Config{Provider: scripted.New(s), Store: store, Tools: reg})
	res2, err := k2.Run(context.Background(), res.SessionID, "and then?")
	if err != nil || res2.Output != "Second answer." {
		t.Fatalf("second run = %+v, %v", res2, err)
	}
	// A third runs out, with an error saying so.
	_, err = k2.Run(context.Background(), res.SessionID, "more?")
	var pe *kernel.ProviderError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "script test.yaml has 3 steps and the conversation needs step 4: the script ran out") {
		t.Fatalf("ran out: %v", err)
	}
}

func TestGuardFailure(t *testing.T) {
	s, err := scripted.Parse("g.yaml", []byte("steps:\n  - match: {role: user, regex: '^deploy'}\n    text: ok\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = scripted.New(s).Stream(context.Background(), kernel.Request{Messages: []kernel.Message{{Role: kernel.RoleUser, Content: "hello"}}}, func(kernel.Delta) {})
	if err == nil || !strings.Contains(err.Error(), `script g.yaml:2: step 1: match: the last user message does not match /^deploy/ (it begins "hello")`) {
		t.Fatalf("guard error = %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	for name, tc := range map[string]struct{ src, want string }{
		"unknown field":     {"steps:\n  - text: hi\n    tool_call: []\n", "script bad.yaml:2: step 1: yaml: unmarshal errors:\n  line 2: field tool_call not found"},
		"empty step":        {"steps:\n  - match: {role: user}\n", "step 1: a step needs text, tool_calls or raw"},
		"no steps":          {"stepz: []\n", "field stepz not found"},
		"bad regex":         {"steps:\n  - text: x\n    match: {regex: '('}\n", "match.regex: error parsing regexp"},
		"bad role":          {"steps:\n  - text: x\n    match: {role: assistant}\n", `match.role must be user or tool, got "assistant"`},
		"call with no name": {"steps:\n  - tool_calls: [{args: {}}]\n", "tool call 1: name is required"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := scripted.Parse("bad.yaml", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestRawArgsAreSentVerbatim(t *testing.T) {
	s, err := scripted.Parse("raw.yaml", []byte("steps:\n  - tool_calls: [{name: x, raw_args: '{\"broken\": '}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := scripted.New(s).Stream(context.Background(), kernel.Request{}, func(kernel.Delta) {})
	if err != nil || resp.Message.ToolCalls[0].Arguments != `{"broken": ` || resp.FinishReason != "tool_calls" {
		t.Fatalf("%+v %v", resp, err)
	}
}

// Arguments are encoded as a model writes them: a shell command's "<", ">"
// and "&" stay literal, so transcripts and approval prompts show them.
func TestArgsKeepShellCharacters(t *testing.T) {
	s, err := scripted.Parse("sh.yaml", []byte("steps:\n  - tool_calls: [{name: x, args: {cmd: 'a < b > c && d'}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := scripted.New(s).Stream(context.Background(), kernel.Request{}, func(kernel.Delta) {})
	if err != nil || resp.Message.ToolCalls[0].Arguments != `{"cmd":"a < b > c && d"}` {
		t.Fatalf("%q %v", resp.Message.ToolCalls[0].Arguments, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(script))
	f.Add([]byte("steps:\n  - text: x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := scripted.Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		_, _ = scripted.New(s).Stream(context.Background(), kernel.Request{Messages: []kernel.Message{{Role: kernel.RoleUser, Content: "x"}}}, func(kernel.Delta) {})
	})
}

func Example() {
	s, _ := scripted.Parse("example.yaml", []byte("steps:\n  - text: Hello from the script.\n"))
	reg := kernel.NewRegistry()
	k, _ := kernel.New(kernel.Config{Provider: scripted.New(s), Store: memory.New(), Tools: reg})
	res, _ := k.Run(context.Background(), "", "hi")
	fmt.Println(res.StopReason, res.Output)
	// Output: completed Hello from the script.
}

// TestTurnsAndTheDeprecatedSteps: a script is a list of turns; "steps:",
// the old name, still works, is reported by Deprecated with its
// file:line:col and the name to write, and its messages keep saying step;
// both at once is an error.
func TestTurnsAndTheDeprecatedSteps(t *testing.T) {
	s, err := scripted.Parse("new.yaml", []byte("turns:\n  - text: hi\n"))
	if err != nil || len(s.Turns) != 1 || len(s.Deprecated()) != 0 {
		t.Fatalf("turns: %+v, %v, deprecated %v", s, err, s.Deprecated())
	}
	_, err = scripted.New(s).Stream(context.Background(), kernel.Request{Messages: []kernel.Message{
		{Role: kernel.RoleUser, Content: "a"}, {Role: kernel.RoleAssistant, Content: "hi"}, {Role: kernel.RoleUser, Content: "b"}}}, func(kernel.Delta) {})
	if err == nil || !strings.Contains(err.Error(), "script new.yaml has 1 turns and the conversation needs turn 2") {
		t.Errorf("running out: %v", err)
	}
	if _, err := scripted.Parse("new.yaml", []byte("turns:\n  - match: {role: user}\n")); err == nil || !strings.Contains(err.Error(), "script new.yaml:2: turn 1: a turn needs text, tool_calls or raw") {
		t.Errorf("an empty turn: %v", err)
	}

	s, err = scripted.Parse("old.yaml", []byte("# an old script\nsteps:\n  - text: hi\n"))
	if err != nil || len(s.Turns) != 1 {
		t.Fatalf("steps: %+v, %v", s, err)
	}
	if d := s.Deprecated(); len(d) != 1 || d[0] != "old.yaml:2:1: steps is deprecated: write turns" {
		t.Errorf("Deprecated() = %q", d)
	}

	_, err = scripted.Parse("both.yaml", []byte("turns:\n  - text: a\nsteps:\n  - text: b\n"))
	if err == nil || !strings.Contains(err.Error(), "script both.yaml:3:1: has both turns and its deprecated name steps: write turns only") {
		t.Errorf("both: %v", err)
	}
}

// TestReplayAsText plays the same script to a kernel that takes tools as
// text: the calls are written in the protocol, the guards see the results,
// the user never sees a tag, and a raw step breaks the protocol on purpose.
func TestReplayAsText(t *testing.T) {
	s, err := scripted.Parse("test.yaml", []byte(script))
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"hermes", "json"} {
		t.Run(format, func(t *testing.T) {
			p, err := scripted.NewText(s, format)
			if err != nil {
				t.Fatal(err)
			}
			reg := kernel.NewRegistry()
			if err := reg.Register(kerneltest.EchoTool("echo")); err != nil {
				t.Fatal(err)
			}
			var deltas strings.Builder
			k, err := kernel.New(kernel.Config{Provider: p, Store: memory.New(), Tools: reg, Model: "m",
				ModelTools: map[string]kernel.ModelTools{"m": {Protocol: kernel.ToolProtocolText, Format: format}},
				OnEvent: func(e kernel.Event) {
					if d, ok := e.(kernel.MessageDelta); ok {
						deltas.WriteString(d.Text)
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			res, err := k.Run(context.Background(), "", "what is here?")
			if err != nil || res.Output != "There is a README." || len(res.Calls) != 1 || res.Calls[0].Outcome != kernel.OutcomeOK {
				t.Fatalf("result = %+v, %v", res, err)
			}
			if deltas.String() != "Let me look.\nThere is a README." {
				t.Fatalf("shown %q", deltas.String())
			}
		})
	}
	if _, err := scripted.NewText(s, "xml"); err == nil {
		t.Fatal("NewText accepted an unknown format")
	}
	bad, err := scripted.Parse("bad.yaml", []byte("steps:\n  - raw: x\n    text: y\n"))
	if err == nil || !strings.Contains(err.Error(), "raw is the whole answer") {
		t.Fatalf("Parse = %v, %v", bad, err)
	}
}
