package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/kernel/toolproto"
	"github.com/agentkernel/agentkernel/schemas"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// textConfig is a kernel whose model takes tools as text in format.
func textConfig(t *testing.T, format string, mode kernel.ToolProtocol, tools ...kernel.Tool) kernel.Config {
	return kernel.Config{
		Model: "local", SystemPrompt: "You are a helpful agent.", Tools: registry(t, tools...),
		ModelTools: map[string]kernel.ModelTools{"local": {Protocol: mode, Format: format}},
	}
}

func codecOf(t *testing.T, format string) *toolproto.Codec {
	t.Helper()
	c, err := toolproto.Lookup(format)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// raw is a text-protocol reply streamed in 7-byte pieces.
func raw(s string) kerneltest.Reply { return kerneltest.Reply{Text: s, Chunk: 7} }

// transcript renders requests as a readable text for golden files; long
// contents keep their head and tail. The first request is number first.
func transcript(reqs []kernel.Request, first int) string {
	var b strings.Builder
	for i, req := range reqs {
		tools := "none"
		if len(req.Tools) > 0 {
			names := make([]string, len(req.Tools))
			for j, t := range req.Tools {
				names[j] = t.Name
			}
			tools = strings.Join(names, ", ")
		}
		fmt.Fprintf(&b, "=== request %d (model %s; tools field: %s)\n", first+i, req.Model, tools)
		for _, m := range req.Messages {
			fmt.Fprintf(&b, "--- %s", m.Role)
			if m.ToolCallID != "" {
				fmt.Fprintf(&b, " %s %s", m.ToolCallID, m.ToolName)
			}
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, " [call %s %s %s]", c.ID, c.Name, c.Arguments)
			}
			b.WriteString("\n")
			c := m.Content
			if len(c) > 3000 {
				c = fmt.Sprintf("%s\n[… %d bytes …]\n%s", c[:1200], len(c)-2400, c[len(c)-1200:])
			}
			b.WriteString(c)
			b.WriteString("\n")
		}
	}
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	testutil.Golden(t, filepath.Join("testdata", "toolproto", name+".golden"), got, *update)
}

// violations are answers that break the protocol, by format and kind, and
// how the model answers the correction.
func violations(c *toolproto.Codec) map[toolproto.Kind]string {
	call := c.FormatCalls("", []toolproto.Call{{Name: "echo", Arguments: `{"text":"hi"}`}})
	many := strings.Repeat(call+"\n", toolproto.DefaultMaxCalls+1)
	big := c.FormatCalls("", []toolproto.Call{{Name: "echo", Arguments: `{"text":"` + strings.Repeat("x", toolproto.DefaultMaxCallBytes) + `"}`}})
	if c.Name() == toolproto.Hermes {
		return map[toolproto.Kind]string{
			toolproto.MalformedCall:    "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": }\n</tool_call>",
			toolproto.UnknownTool:      "<tool_call>\n{\"name\": \"delete_everything\", \"arguments\": {}}\n</tool_call>",
			toolproto.FabricatedResult: call + "\n<tool_response>\nhi\n</tool_response>\nThe echo said hi.",
			toolproto.ProseAfterCall:   call + "\nThe echo said hi.",
			toolproto.TooManyCalls:     many,
			toolproto.CallTooLarge:     big,
		}
	}
	return map[toolproto.Kind]string{
		toolproto.MalformedCall:    `{"name": "echo", "parameters": {"text": }}`,
		toolproto.UnknownTool:      `{"name": "delete_everything", "parameters": {}}`,
		toolproto.FabricatedResult: call + "\n{\"tool_result\": {\"id\": \"call_k1_0\", \"name\": \"echo\", \"content\": \"hi\"}}",
		toolproto.ProseAfterCall:   call + "\nThe echo said hi.",
		toolproto.TooManyCalls:     many,
		toolproto.CallTooLarge:     big,
	}
}

// TestTextProtocolGolden records, per format, the requests the model sees:
// the system prompt with the tools, a parallel round with its results, an
// error result, and each correction.
func TestTextProtocolGolden(t *testing.T) {
	for _, format := range toolproto.Formats() {
		c := codecOf(t, format)
		parallel := c.FormatCalls("I'll echo both.", []toolproto.Call{{Name: "echo", Arguments: `{"text":"one"}`}, {Name: "echo", Arguments: `{"text":"two"}`}})
		t.Run(format+"/parallel_round", func(t *testing.T) {
			h := newHarness(t, textConfig(t, format, kernel.ToolProtocolText, kerneltest.EchoTool("echo")), raw(parallel), raw("Both echoed: one, two."))
			res, err := h.k.Run(context.Background(), "", "echo one and two")
			if err != nil || res.StopReason != kernel.StopCompleted || res.Output != "Both echoed: one, two." {
				t.Fatalf("run = %+v, %v", res, err)
			}
			if len(res.Calls) != 2 || res.Calls[0].Outcome != kernel.OutcomeOK || res.Calls[1].Outcome != kernel.OutcomeOK {
				t.Fatalf("calls = %+v", res.Calls)
			}
			reqs := h.prov.Requests()
			golden(t, format+"/system_prompt", transcript(reqs[:1], 1))
			golden(t, format+"/parallel_round", transcript(reqs[1:], 2))
			sess := checkHistory(t, h.store, res.SessionID)
			a := sess.Messages[1]
			if a.RawText() != parallel || a.Content != "I'll echo both.\n" || len(a.ToolCalls) != 2 || a.ToolCalls[0].ID == a.ToolCalls[1].ID {
				t.Fatalf("stored answer = %+v", a)
			}
			if sess.Messages[2].ToolCallID != a.ToolCalls[0].ID || sess.Messages[3].ToolCallID != a.ToolCalls[1].ID ||
				sess.Messages[2].Content != "one" || sess.Messages[3].Content != "two" {
				t.Fatalf("results are not paired with their calls: %+v", sess.Messages[2:4])
			}
		})
		t.Run(format+"/error_result", func(t *testing.T) {
			bad := c.FormatCalls("", []toolproto.Call{{Name: "echo", Arguments: `{"text": 5}`}})
			h := newHarness(t, textConfig(t, format, kernel.ToolProtocolText, kerneltest.EchoTool("echo")), raw(bad), raw("The echo refused a number."))
			res, err := h.k.Run(context.Background(), "", "echo 5")
			if err != nil || res.Calls[0].Outcome != kernel.OutcomeError {
				t.Fatalf("run = %+v, %v", res, err)
			}
			golden(t, format+"/error_result", transcript(h.prov.Requests()[1:], 2))
		})
		good := c.FormatCalls("", []toolproto.Call{{Name: "echo", Arguments: `{"text":"hi"}`}})
		for kind, answer := range violations(c) {
			t.Run(format+"/correction_"+string(kind), func(t *testing.T) {
				h := newHarness(t, textConfig(t, format, kernel.ToolProtocolText, kerneltest.EchoTool("echo")), raw(answer), raw(good), raw("The echo said hi."))
				res, err := h.k.Run(context.Background(), "", "echo hi")
				if err != nil || res.StopReason != kernel.StopCompleted || len(res.Calls) != 1 || res.Calls[0].Outcome != kernel.OutcomeOK {
					t.Fatalf("run = %+v, %v", res, err)
				}
				reqs := h.prov.Requests()
				golden(t, format+"/correction_"+string(kind), transcript(reqs[1:2], 2))
				sess := checkHistory(t, h.store, res.SessionID)
				fix := sess.Messages[2]
				if fix.Role != kernel.RoleUser || fix.CorrectionKind() != string(kind) || !strings.HasPrefix(fix.Content, toolproto.CorrectionPrefix) {
					t.Fatalf("correction = %+v", fix)
				}
				if sess.Messages[1].RawText() != answer || len(sess.Messages[1].ToolCalls) != 0 {
					t.Fatalf("the violating answer is not stored as written: %+v", sess.Messages[1])
				}
				st, err := kernel.WalkState(sess, 0, nil)
				if err != nil || st.Corrections != 1 || st.Run != 1 || st.Turn != 3 {
					t.Fatalf("walked state: corrections %d, run %d, turn %d, %v", st.Corrections, st.Run, st.Turn, err)
				}
			})
		}
	}
}

// TestTextProtocolStreaming checks what the user sees of a text-protocol
// answer: the text before the call, never a piece of a tag.
func TestTextProtocolStreaming(t *testing.T) {
	c := codecOf(t, toolproto.Hermes)
	answer := c.FormatCalls("Let me check <b>that</b>.", []toolproto.Call{{Name: "echo", Arguments: `{"text":"x"}`}})
	h := newHarness(t, textConfig(t, toolproto.Hermes, kernel.ToolProtocolText, kerneltest.EchoTool("echo")),
		kerneltest.Reply{Text: answer, Chunk: 1}, raw("Done."))
	if _, err := h.k.Run(context.Background(), "", "check"); err != nil {
		t.Fatal(err)
	}
	var shown strings.Builder
	h.mu.Lock()
	for _, e := range h.events {
		if d, ok := e.(kernel.MessageDelta); ok {
			if strings.Contains(d.Text, "<t") || strings.Contains(d.Text, "tool_") {
				t.Errorf("a delta shows part of a tag: %q", d.Text)
			}
			shown.WriteString(d.Text)
		}
	}
	h.mu.Unlock()
	if shown.String() != "Let me check <b>that</b>.\nDone." {
		t.Fatalf("shown %q", shown.String())
	}
}

// TestTextProtocolRepeatedViolation stops the run when the answer to a
// correction breaks the protocol again, and when corrections run out.
func TestTextProtocolRepeatedViolation(t *testing.T) {
	c := codecOf(t, toolproto.Hermes)
	bad := violations(c)[toolproto.ProseAfterCall]
	good := c.FormatCalls("", []toolproto.Call{{Name: "echo", Arguments: `{"text":"hi"}`}})
	t.Run("again after a correction", func(t *testing.T) {
		h := newHarness(t, textConfig(t, toolproto.Hermes, kernel.ToolProtocolText, kerneltest.EchoTool("echo")), raw(bad), raw(bad))
		res, err := h.k.Run(context.Background(), "", "echo hi")
		var pe *kernel.ToolProtocolError
		if !errors.Is(err, kernel.ErrToolProtocol) || !errors.As(err, &pe) || pe.Kind != toolproto.ProseAfterCall || pe.Corrections != 1 {
			t.Fatalf("err = %v", err)
		}
		if res.StopReason != kernel.StopToolProtocol || h.prov.Remaining() != 0 {
			t.Fatalf("result = %+v", res)
		}
		sess := checkHistory(t, h.store, res.SessionID)
		if n := len(sess.Messages); n != 4 || sess.Messages[3].RawText() != bad || sess.Meta.Status != kernel.StatusFailed {
			t.Fatalf("stored %d messages: %+v", n, sess.Messages)
		}
	})
	t.Run("MaxCorrections", func(t *testing.T) {
		cfg := textConfig(t, toolproto.Hermes, kernel.ToolProtocolText, kerneltest.EchoTool("echo"))
		cfg.MaxCorrections = 2
		h := newHarness(t, cfg, raw(bad), raw(good), raw(bad), raw(good), raw(bad))
		res, err := h.k.Run(context.Background(), "", "echo hi")
		if !errors.Is(err, kernel.ErrToolProtocol) || res.StopReason != kernel.StopToolProtocol || len(res.Calls) != 2 {
			t.Fatalf("run = %+v, %v", res, err)
		}
	})
}

// TestAutoSwitchOnRefusal: a server that refuses the tools field gets the
// same request again in text, once; the session remembers, so the next
// run and a fresh kernel send text from the start.
func TestAutoSwitchOnRefusal(t *testing.T) {
	c := codecOf(t, toolproto.Hermes)
	call := c.FormatCalls("", []toolproto.Call{{Name: "echo", Arguments: `{"text":"hi"}`}})
	refusal := &kernel.ProviderError{Provider: "openai", StatusCode: 400, Code: kernel.CodeToolsUnsupported, Message: "registry.ollama.ai/library/gemma3:4b does not support tools"}
	cfg := textConfig(t, toolproto.Hermes, kernel.ToolProtocolAuto, kerneltest.EchoTool("echo"))
	h := newHarness(t, cfg, kerneltest.Reply{Err: refusal}, raw(call), raw("It said hi."), raw(call), raw("Again hi."))
	res, err := h.k.Run(context.Background(), "", "echo hi")
	if err != nil || res.StopReason != kernel.StopCompleted || len(res.Calls) != 1 || res.Calls[0].Outcome != kernel.OutcomeOK {
		t.Fatalf("run = %+v, %v", res, err)
	}
	reqs := h.prov.Requests()
	if len(reqs[0].Tools) != 1 || len(reqs[1].Tools) != 0 || !strings.Contains(reqs[1].Messages[0].Content, "<tools>") {
		t.Fatalf("requests: native first, then text: %s", transcript(reqs[:2], 1))
	}
	notices := 0
	h.mu.Lock()
	for _, e := range h.events {
		if n, ok := e.(kernel.Notice); ok && n.Source == "tool_protocol" {
			notices++
			if !strings.Contains(n.Text, "does not support tools") || !strings.Contains(n.Text, "hermes") {
				t.Errorf("notice = %q", n.Text)
			}
		}
		if _, ok := e.(kernel.ProviderRetry); ok {
			t.Errorf("the switch is not a retry: %+v", e)
		}
	}
	h.mu.Unlock()
	sess := checkHistory(t, h.store, res.SessionID)
	if notices != 1 || sess.Meta.Labels[kernel.LabelTextTools] != "local" {
		t.Fatalf("notices %d, labels %v", notices, sess.Meta.Labels)
	}
	// A restart: a new kernel over the same store sends text at once.
	cfg2 := textConfig(t, toolproto.Hermes, kernel.ToolProtocolAuto, kerneltest.EchoTool("echo"))
	cfg2.Provider, cfg2.Store = h.prov, h.store
	k2, err := kernel.New(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k2.Run(context.Background(), res.SessionID, "once more"); err != nil {
		t.Fatal(err)
	}
	reqs = h.prov.Requests()
	if len(reqs) != 5 || len(reqs[3].Tools) != 0 || !strings.Contains(reqs[3].Messages[0].Content, "<tools>") {
		t.Fatalf("after resume: %s", transcript(reqs[3:], 4))
	}
}

// TestAutoSwitchOnIgnoredTools: a server that takes the tools field but
// lets the model write its calls as text (vLLM without a tool parser) is
// read as text from that answer on; the tags never reach the user.
func TestAutoSwitchOnIgnoredTools(t *testing.T) {
	c := codecOf(t, toolproto.Hermes)
	call := c.FormatCalls("Checking.", []toolproto.Call{{Name: "echo", Arguments: `{"text":"hi"}`}})
	h := newHarness(t, textConfig(t, toolproto.Hermes, kernel.ToolProtocolAuto, kerneltest.EchoTool("echo")), raw(call), raw("It said hi."))
	res, err := h.k.Run(context.Background(), "", "echo hi")
	if err != nil || len(res.Calls) != 1 || res.Calls[0].Outcome != kernel.OutcomeOK || res.Output != "It said hi." {
		t.Fatalf("run = %+v, %v", res, err)
	}
	reqs := h.prov.Requests()
	if len(reqs[0].Tools) != 1 || len(reqs[1].Tools) != 0 {
		t.Fatalf("requests: %s", transcript(reqs, 1))
	}
	h.mu.Lock()
	for _, e := range h.events {
		if d, ok := e.(kernel.MessageDelta); ok && strings.Contains(d.Text, "tool_call") {
			t.Errorf("a tag reached the user: %q", d.Text)
		}
	}
	h.mu.Unlock()
}

// TestNativeModeRefusal: without auto, a refusal is not retried and says
// how to fix it.
func TestNativeModeRefusal(t *testing.T) {
	refusal := &kernel.ProviderError{Provider: "openai", StatusCode: 500, Code: kernel.CodeToolsUnsupported, Message: "tools param requires --jinja flag"}
	h := newHarness(t, kernel.Config{Tools: registry(t, kerneltest.EchoTool("echo"))}, kerneltest.Reply{Err: refusal})
	_, err := h.k.Run(context.Background(), "", "echo hi")
	var mce *kernel.ModelCallError
	if !errors.As(err, &mce) || mce.Cause != kernel.CodeToolsUnsupported || mce.Attempts != 1 || !strings.Contains(err.Error(), "tool_protocol") {
		t.Fatalf("err = %v", err)
	}
}

// TestTextProtocolApproval: an approval on the text tool protocol
// resumes with the same protocol, and the approved call's result comes
// back as text.
func TestTextProtocolApproval(t *testing.T) {
	c := codecOf(t, toolproto.JSON)
	write := kerneltest.NewRecorder("write", kernel.TierSideEffecting, "written")
	cfg := textConfig(t, toolproto.JSON, kernel.ToolProtocolText, write)
	cfg.Policy = &fakePolicy{effects: map[string]kernel.Effect{"write": kernel.EffectAsk}}
	h := newHarness(t, cfg, raw(c.FormatCalls("", []toolproto.Call{{Name: "write", Arguments: `{"path":"a"}`}})), raw("Written."))
	res, err := h.k.Run(context.Background(), "", "write a")
	if err != nil || res.StopReason != kernel.StopAwaitingApproval {
		t.Fatalf("run = %+v, %v", res, err)
	}
	res, err = h.k.Resolve(context.Background(), res.SessionID, true, "")
	if err != nil || res.Output != "Written." || len(write.Calls()) != 1 {
		t.Fatalf("resolve = %+v, %v", res, err)
	}
	last := h.prov.Requests()[1]
	tail := last.Messages[len(last.Messages)-1]
	if len(last.Tools) != 0 || tail.Role != kernel.RoleUser || !c.IsResults(tail.Content) || !strings.Contains(tail.Content, `"content":"written"`) {
		t.Fatalf("request after approval: %s", transcript([]kernel.Request{last}, 2))
	}
}

func TestToolProtocolConfig(t *testing.T) {
	for _, p := range []kernel.ModelTools{{Protocol: "sometimes"}, {Protocol: kernel.ToolProtocolText, Format: "xml"}} {
		_, err := kernel.New(kernel.Config{Provider: kerneltest.NewProvider(), Store: newHarness(t, kernel.Config{}).store,
			ModelTools: map[string]kernel.ModelTools{"m": p}})
		if err == nil || !strings.Contains(err.Error(), `ModelTools["m"]`) {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

// TestCorrectionKindsInSchema: the events schema lists exactly the
// violations the codec can report.
func TestCorrectionKindsInSchema(t *testing.T) {
	raw, err := schemas.FS.ReadFile("events.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Defs struct {
			Note struct {
				Properties struct {
					Correction struct {
						Enum []string `json:"enum"`
					} `json:"correction"`
				} `json:"properties"`
			} `json:"protocolNote"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, k := range toolproto.Kinds() {
		kinds = append(kinds, string(k))
	}
	if got := doc.Defs.Note.Properties.Correction.Enum; !slices.Equal(got, kinds) {
		t.Fatalf("schema lists %v, the codec reports %v", got, kinds)
	}
}

// textLoop is a fake model writing text-protocol calls to read_big until
// it has made `calls` of them, answering summary requests with a summary.
type textLoop struct {
	c     *toolproto.Codec
	calls int
	mu    sync.Mutex
	reqs  []kernel.Request
	made  int
}

func (p *textLoop) Stream(_ context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = append(p.reqs, req)
	text := "Summary: the agent read files 1 to " + strconv.Itoa(p.made) + "."
	if !strings.Contains(req.Messages[0].Content, "You compact the history") {
		if p.made == p.calls {
			text = "All read."
		} else {
			p.made++
			text = p.c.FormatCalls("Next.", []toolproto.Call{{Name: "read_big", Arguments: `{"n":` + strconv.Itoa(p.made) + `}`}})
		}
	}
	emit(kernel.Delta{Text: text})
	return kernel.Response{Message: kernel.Message{Content: text}, Usage: kernel.Usage{InputTokens: int64(kernel.CountRequest(nil, req.Messages, nil)), OutputTokens: 10}}, nil
}

// TestTextProtocolCompaction: compaction works the same on a text-protocol
// session: summaries are plain requests, every turn's request stays in
// text with its calls and results paired.
func TestTextProtocolCompaction(t *testing.T) {
	c := codecOf(t, toolproto.Hermes)
	p := &textLoop{c: c, calls: 8}
	var compacted int
	k, err := kernel.New(kernel.Config{Provider: p, Store: memory.New(), Tools: registry(t, bigTool(6000)), Model: "local",
		MaxTurns: 20, ContextWindow: 8000,
		ModelTools: map[string]kernel.ModelTools{"local": {Protocol: kernel.ToolProtocolText}},
		OnEvent: func(e kernel.Event) {
			if _, ok := e.(kernel.ContextCompacted); ok {
				compacted++
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(context.Background(), "", "read them all")
	if err != nil || res.StopReason != kernel.StopCompleted || len(res.Calls) != 8 {
		t.Fatalf("run = %+v, %v", res, err)
	}
	if compacted == 0 {
		t.Fatal("no compaction: the test does not exercise it")
	}
	for i, req := range p.reqs {
		summary := strings.Contains(req.Messages[0].Content, "You compact the history")
		if len(req.Tools) != 0 || summary == strings.Contains(req.Messages[0].Content, "<tools>") {
			t.Fatalf("request %d: tools field %d, summary %v: %s", i+1, len(req.Tools), summary, transcript([]kernel.Request{req}, i+1))
		}
		for _, m := range req.Messages {
			if m.Role == kernel.RoleTool || len(m.ToolCalls) > 0 {
				t.Fatalf("request %d has a native tool message: %+v", i+1, m)
			}
		}
	}
}

// TestCorrectionReplayedOnResume: a later run, in a new kernel over the
// same store, sends the corrected exchange exactly as the first run did.
func TestCorrectionReplayedOnResume(t *testing.T) {
	c := codecOf(t, toolproto.JSON)
	bad := violations(c)[toolproto.MalformedCall]
	good := c.FormatCalls("", []toolproto.Call{{Name: "echo", Arguments: `{"text":"hi"}`}})
	h := newHarness(t, textConfig(t, toolproto.JSON, kernel.ToolProtocolText, kerneltest.EchoTool("echo")), raw(bad), raw(good), raw("Said hi."), raw("Again."))
	res, err := h.k.Run(context.Background(), "", "echo hi")
	if err != nil {
		t.Fatal(err)
	}
	cfg := textConfig(t, toolproto.JSON, kernel.ToolProtocolText, kerneltest.EchoTool("echo"))
	cfg.Provider, cfg.Store = h.prov, h.store
	k2, err := kernel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k2.Run(context.Background(), res.SessionID, "again"); err != nil {
		t.Fatal(err)
	}
	reqs := h.prov.Requests()
	last, resumed := reqs[2].Messages, reqs[3].Messages
	if len(resumed) != len(last)+2 {
		t.Fatalf("resumed request has %d messages, the run's last had %d", len(resumed), len(last))
	}
	for i := range last {
		if last[i].Role != resumed[i].Role || last[i].Content != resumed[i].Content {
			t.Fatalf("message %d differs after resume:\n%+v\n%+v", i, last[i], resumed[i])
		}
	}
	if resumed[2].Content != bad || !strings.HasPrefix(resumed[3].Content, toolproto.CorrectionPrefix) {
		t.Fatalf("the corrected exchange is not replayed as written: %s", transcript(reqs[3:], 4))
	}
}

// silent answers without streaming a delta, as a provider may.
type silent struct{ answers []string }

func (s *silent) Stream(_ context.Context, _ kernel.Request, _ func(kernel.Delta)) (kernel.Response, error) {
	a := s.answers[0]
	s.answers = s.answers[1:]
	return kernel.Response{Message: kernel.Message{Content: a}}, nil
}

// TestTextProtocolWithoutDeltas: an answer that was not streamed is read
// whole.
func TestTextProtocolWithoutDeltas(t *testing.T) {
	c := codecOf(t, toolproto.Hermes)
	cfg := textConfig(t, toolproto.Hermes, kernel.ToolProtocolText, kerneltest.EchoTool("echo"))
	cfg.Provider = &silent{answers: []string{c.FormatCalls("", []toolproto.Call{{Name: "echo", Arguments: `{"text":"hi"}`}}), "Said hi."}}
	cfg.Store = memory.New()
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(context.Background(), "", "echo hi")
	if err != nil || len(res.Calls) != 1 || res.Calls[0].Outcome != kernel.OutcomeOK || res.Output != "Said hi." {
		t.Fatalf("run = %+v, %v", res, err)
	}
}
