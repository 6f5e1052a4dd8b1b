package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/openai"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/kernel/tokenizer"
)

// sseServer is an OpenAI-compatible server that answers from a function of
// the request, streamed as Chat Completions SSE chunks.
type sseServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs [][]byte
}

// sseReply is what the fake model says.
type sseReply struct {
	text  string
	calls [][2]string // name, arguments
}

type wireReq struct {
	Messages []struct {
		Role       string `json:"role"`
		Content    any    `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID string `json:"id"`
		} `json:"tool_calls"`
	} `json:"messages"`
}

func newSSEServer(t testing.TB, answer func(n int, body []byte) sseReply) *sseServer {
	s := &sseServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := make([]byte, 0, r.ContentLength)
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Body.Read(buf)
			body = append(body, buf[:n]...)
			if err != nil {
				break
			}
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, body)
		n := len(s.reqs)
		s.mu.Unlock()
		rep := answer(n, body)
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(v any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		type fn struct {
			Name      string `json:"name,omitempty"`
			Arguments string `json:"arguments"`
		}
		type tc struct {
			Index    int    `json:"index"`
			ID       string `json:"id,omitempty"`
			Type     string `json:"type,omitempty"`
			Function fn     `json:"function"`
		}
		chunk := func(delta map[string]any, finish any) map[string]any {
			return map[string]any{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		}
		send(chunk(map[string]any{"role": "assistant", "content": rep.text}, nil))
		for i, c := range rep.calls {
			send(chunk(map[string]any{"tool_calls": []tc{{Index: i, ID: fmt.Sprintf("call_%d_%d", n, i), Type: "function", Function: fn{Name: c[0], Arguments: c[1]}}}}, nil))
		}
		finish := "stop"
		if len(rep.calls) > 0 {
			finish = "tool_calls"
		}
		send(chunk(map[string]any{}, finish))
		send(map[string]any{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini", "choices": []any{},
			"usage": map[string]any{"prompt_tokens": len(body) / 4, "completion_tokens": 20, "total_tokens": len(body)/4 + 20}})
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// recorder keeps every request the kernel sends, and can stop the run at
// a chosen call as a crash would.
type recorder struct {
	kernel.Provider
	mu     sync.Mutex
	gens   []kernel.Request
	sums   int
	crash  func(req kernel.Request, summarise bool) bool
	cancel context.CancelFunc
}

func isSummarise(req kernel.Request) bool {
	return len(req.Messages) > 0 && req.Messages[0].Content == kernel.DefaultCompactionPrompt
}

func (r *recorder) Stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	sum := isSummarise(req)
	r.mu.Lock()
	if sum {
		r.sums++
	} else {
		r.gens = append(r.gens, kernel.Request{Model: req.Model, Messages: append([]kernel.Message(nil), req.Messages...), Tools: append([]kernel.ToolSpec(nil), req.Tools...)})
	}
	crash := r.crash != nil && r.crash(req, sum)
	r.mu.Unlock()
	if crash {
		r.cancel()
		return kernel.Response{}, context.Canceled
	}
	return r.Provider.Stream(ctx, req, emit)
}

// bigTool returns size bytes of varied text, different for every call.
func bigTool(size int) kernel.Tool {
	return kernel.NewTool(kernel.ToolSpec{Name: "read_big", Description: "reads a large file", Tier: kernel.TierReadOnly, Source: "test",
		Schema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)},
		func(_ context.Context, args json.RawMessage) (kernel.Result, error) {
			var a struct{ N int }
			json.Unmarshal(args, &a)
			var b strings.Builder
			for i := 0; b.Len() < size; i++ {
				fmt.Fprintf(&b, "line %d of file %d: func handler%d(w http.ResponseWriter) error { return nil }\n", i, a.N, i*a.N)
			}
			return kernel.Result{Content: b.String()}, nil
		})
}

// longRun is the fake model of a long session: tool calls (two at a time
// every fifth turn) until turn `turns`, then an answer; summaries on
// request.
func longRun(turns int) func(n int, body []byte) sseReply {
	var mu sync.Mutex
	gen := 0
	return func(n int, body []byte) sseReply {
		if strings.Contains(string(body), "You compact the history") {
			return sseReply{text: fmt.Sprintf("Summary %d: the agent read files 1..%d; handlers are in file 3; nothing failed.", n, gen)}
		}
		mu.Lock()
		gen++
		g := gen
		mu.Unlock()
		if g%turns == 0 {
			return sseReply{text: "All files read. Done."}
		}
		if g%5 == 0 {
			return sseReply{calls: [][2]string{{"read_big", fmt.Sprintf(`{"n":%d}`, g)}, {"read_big", fmt.Sprintf(`{"n":%d}`, g+1000)}}}
		}
		return sseReply{text: "Reading the next file.", calls: [][2]string{{"read_big", fmt.Sprintf(`{"n":%d}`, g)}}}
	}
}

func newLongKernel(t testing.TB, srvURL string, store kernel.Store, rec *recorder, events func(kernel.Event)) *kernel.Kernel {
	t.Helper()
	p, err := openai.New(openai.Config{BaseURL: srvURL})
	if err != nil {
		t.Fatal(err)
	}
	rec.Provider = p
	tok, _ := tokenizer.Get(tokenizer.O200kBase)
	reg := kernel.NewRegistry()
	if err := reg.Register(bigTool(16 << 10)); err != nil {
		t.Fatal(err)
	}
	k, err := kernel.New(kernel.Config{Provider: rec, Store: store, Tools: reg, Model: "gpt-4o-mini",
		SystemPrompt: "You are a careful engineering assistant.", MaxTurns: 100,
		ContextWindow: 16384, Tokenizer: tok, OnEvent: events})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// checkPairs checks, on the wire, that every tool call in a request has its
// result in the same request and every result its call.
func checkPairs(t *testing.T, n int, body []byte) {
	var w wireReq
	if err := json.Unmarshal(body, &w); err != nil {
		t.Fatalf("request %d: %v", n, err)
	}
	open := map[string]bool{}
	for _, m := range w.Messages {
		for _, c := range m.ToolCalls {
			open[c.ID] = true
		}
		if m.Role == "tool" {
			if !open[m.ToolCallID] {
				t.Fatalf("request %d: tool result %s without its call", n, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		}
	}
	if len(open) > 0 {
		t.Fatalf("request %d: tool calls without results: %v", n, open)
	}
}

// TestLongSessionFitsWindow runs 200 turns (two runs of 100) of 16 KB
// tool results against a 16k window through the OpenAI adapter and a
// local SSE server: every request is under the window by the tokenizer's
// own count, every tool call is paired with its result, the store keeps
// every original message.
func TestLongSessionFitsWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	srv := newSSEServer(t, longRun(100))
	store := memory.New()
	var compactions []kernel.ContextCompacted
	var mu sync.Mutex
	rec := &recorder{}
	k := newLongKernel(t, srv.srv.URL+"/v1", store, rec, func(e kernel.Event) {
		if c, ok := e.(kernel.ContextCompacted); ok {
			mu.Lock()
			compactions = append(compactions, c)
			mu.Unlock()
		}
	})
	ctx := context.Background()
	start := time.Now()
	res, err := k.Run(ctx, "", "Read every file and tell me where the handlers are.")
	if err != nil || res.StopReason != kernel.StopCompleted {
		t.Fatalf("run 1: %v %+v", err, res)
	}
	res, err = k.Run(ctx, res.SessionID, "Now read them all again.")
	if err != nil || res.StopReason != kernel.StopCompleted {
		t.Fatalf("run 2: %v %+v", err, res)
	}
	elapsed := time.Since(start)
	enc, _ := tokenizer.Get(tokenizer.O200kBase)
	// The 200 requests repeat the same 16 KB results many times over: count
	// each distinct text once (a text's count does not depend on where it
	// is), which keeps this check from tokenising ~40 MB under -race.
	counted := map[string]int{}
	tok := kernel.TokenizerFunc(func(text string) int {
		n, ok := counted[text]
		if !ok {
			n = enc.Count(text)
			counted[text] = n
		}
		return n
	})
	if len(rec.gens) != 200 {
		t.Fatalf("%d generations, want 200", len(rec.gens))
	}
	maxUsed := 0
	for i, req := range rec.gens {
		n := kernel.CountRequest(tok, req.Messages, req.Tools)
		maxUsed = max(maxUsed, n)
		if n > 16384*85/100 {
			t.Fatalf("request %d: %d tokens, over the hard limit of a 16384 window", i+1, n)
		}
	}
	srv.mu.Lock()
	for i, b := range srv.reqs {
		checkPairs(t, i+1, b)
	}
	srv.mu.Unlock()
	s, err := store.Load(ctx, res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	var records, tools, assistants int
	for _, m := range s.Messages {
		switch m.Role {
		case kernel.RoleCompaction:
			records++
		case kernel.RoleTool:
			tools++
			if len(m.Content) < 16<<10 {
				t.Fatalf("stored tool result %d was trimmed in the store (%d bytes)", m.Seq, len(m.Content))
			}
		case kernel.RoleAssistant:
			assistants++
		}
	}
	if assistants != 200 || tools != 236 || records == 0 {
		t.Fatalf("stored %d assistant messages, %d tool results, %d compaction records", assistants, tools, records)
	}
	var summarised, trimmed int
	var sumTokens int64
	var sumTime time.Duration
	for _, c := range compactions {
		switch c.Kind {
		case "summarised":
			summarised++
			sumTokens += c.Usage.Total()
			sumTime += c.Duration
		case "trimmed":
			trimmed++
		}
	}
	if summarised == 0 || rec.sums < summarised {
		t.Fatalf("%d summaries (%d summarise calls), want some", summarised, rec.sums)
	}
	t.Logf("200 turns in %s: %d compaction records (%d summarised, %d trimmed only), summaries cost %d tokens and %s; largest request %d tokens",
		elapsed.Round(time.Millisecond), records, summarised, trimmed, sumTokens, sumTime.Round(time.Millisecond), maxUsed)
	// What the model saw last is what the store rebuilds.
	last := rec.gens[len(rec.gens)-1].Messages
	rebuilt, err := kernel.RequestMessages("You are a careful engineering assistant.", s.Messages[:len(s.Messages)-1])
	if err != nil {
		t.Fatal(err)
	}
	if !sameMessages(last, rebuilt) {
		t.Fatalf("the store rebuilds a different last request: %d vs %d messages", len(last), len(rebuilt))
	}
}

func sameMessages(a, b []kernel.Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.Time, y.Time = time.Time{}, time.Time{}
		xb, _ := json.Marshal(x)
		yb, _ := json.Marshal(y)
		if string(xb) != string(yb) {
			return false
		}
	}
	return true
}

// TestCrashDuringCompactionResumes stops the process (cancels the run) in
// the middle of a summary call, and again right after a compaction record
// is stored: in both cases a fresh kernel on the same store rebuilds a
// valid request, and after a stored record exactly the request the first
// kernel sent.
func TestCrashDuringCompactionResumes(t *testing.T) {
	ctx := context.Background()
	const sys = "You are a careful engineering assistant."

	t.Run("during the summary call", func(t *testing.T) {
		srv := newSSEServer(t, longRun(100))
		store := memory.New()
		rctx, cancel := context.WithCancel(ctx)
		rec := &recorder{cancel: cancel, crash: func(_ kernel.Request, sum bool) bool { return sum }}
		k := newLongKernel(t, srv.srv.URL+"/v1", store, rec, nil)
		res, err := k.Run(rctx, "", "Read every file.")
		if !errors.Is(err, context.Canceled) || res.StopReason != kernel.StopCancelled {
			t.Fatalf("run = %v, %+v", err, res)
		}
		s, _ := store.Load(ctx, res.SessionID)
		for _, m := range s.Messages {
			if m.Role == kernel.RoleCompaction {
				if c, _ := kernel.ParseCompaction(&m); c.Summary != "" {
					t.Fatal("a compaction record was stored for a summary that never came back")
				}
			}
		}
		// A new process: it compacts again and carries on.
		rec2 := &recorder{}
		k2 := newLongKernel(t, srv.srv.URL+"/v1", store, rec2, nil)
		if _, err := k2.Run(ctx, res.SessionID, "Carry on."); err != nil {
			t.Fatal(err)
		}
		if rec2.sums == 0 {
			t.Fatal("the resumed run did not compact")
		}
		first := rec2.gens[0].Messages
		if !strings.Contains(first[0].Content, kernel.SummaryPrefix) {
			t.Fatalf("the resumed request carries no summary: %.200s", first[0].Content)
		}
	})

	t.Run("after the record", func(t *testing.T) {
		srv := newSSEServer(t, longRun(100))
		store := memory.New()
		rctx, cancel := context.WithCancel(ctx)
		sawSummary := false
		rec := &recorder{cancel: cancel}
		rec.crash = func(_ kernel.Request, sum bool) bool {
			if sum {
				sawSummary = true
				return false
			}
			return sawSummary // the first generation after a summary
		}
		k := newLongKernel(t, srv.srv.URL+"/v1", store, rec, nil)
		res, err := k.Run(rctx, "", "Read every file.")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("run = %v, %+v", err, res)
		}
		sent := rec.gens[len(rec.gens)-1].Messages
		s, _ := store.Load(ctx, res.SessionID)
		rebuilt, err := kernel.RequestMessages(sys, s.Messages)
		if err != nil {
			t.Fatal(err)
		}
		if !sameMessages(sent, rebuilt) {
			t.Fatalf("rebuilt request differs from the one sent: %d vs %d messages", len(sent), len(rebuilt))
		}
		// A fresh kernel sends it again, with the new prompt, without a
		// second summary.
		rec2 := &recorder{}
		k2 := newLongKernel(t, srv.srv.URL+"/v1", store, rec2, nil)
		if _, err := k2.Run(ctx, res.SessionID, "Carry on."); err != nil {
			t.Fatal(err)
		}
		got := rec2.gens[0].Messages
		if !sameMessages(got[:len(got)-1], sent) || got[len(got)-1].Content != "Carry on." {
			t.Fatalf("the resumed request is not the stored one plus the prompt")
		}
	})
}
