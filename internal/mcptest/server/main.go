// Command server is an MCP server written with the official Go SDK, for
// the tests and the demo of the kernel's MCP client: it speaks stdio, or
// streamable HTTP with -http ADDR. Its tools exercise what a client must
// handle: text and structured results, isError, progress, images and
// embedded resources, a crash and a hang mid-call, and a tool list that
// changes. With -calls FILE it appends every call it receives (and every
// cancellation) to FILE, so tests see what reached it. With
// OTEL_EXPORTER_OTLP_ENDPOINT set it exports a span per call, continuing
// the trace context of the call's _meta.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	callsMu   sync.Mutex
	callsFile string
)

// record appends a line to the -calls file.
func record(format string, args ...any) {
	if callsFile == "" {
		return
	}
	callsMu.Lock()
	defer callsMu.Unlock()
	f, err := os.OpenFile(callsFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		log.Printf("record: %v", err)
		return
	}
	fmt.Fprintf(f, format+"\n", args...)
	f.Close()
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func args(req *mcp.CallToolRequest) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(req.Params.Arguments, &m)
	record("call %s %s", req.Params.Name, req.Params.Arguments)
	return m
}

func schema(s string) json.RawMessage { return json.RawMessage(s) }

func main() {
	addr := flag.String("http", "", "serve streamable HTTP on `ADDR` (print the URL on stdout) instead of stdio")
	token := flag.String("token", "", "with -http, require this bearer token")
	broken := flag.Bool("broken-schemas", false, "also offer a tool with a huge schema and one with an invalid schema")
	flag.StringVar(&callsFile, "calls", "", "append every call received to `FILE`")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("testserver: ")

	s := mcp.NewServer(&mcp.Implementation{Name: "testserver", Version: "1"}, nil)
	tracing(s)
	yes := true
	s.AddTool(&mcp.Tool{Name: "echo", Description: "Echo text back.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: schema(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(fmt.Sprint(args(req)["text"])), nil
		})
	s.AddTool(&mcp.Tool{Name: "add", Description: "Add two integers; the sum is structured content.",
		InputSchema: schema(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			m := args(req)
			a, _ := m["a"].(float64)
			b, _ := m["b"].(float64)
			return &mcp.CallToolResult{StructuredContent: map[string]any{"sum": a + b}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "write_note", Description: "Store a note (a side effect).", Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes},
		InputSchema: schema(`{"type":"object","properties":{"title":{"type":"string"},"body":{"type":"string"}},"required":["title","body"]}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			m := args(req)
			return text(fmt.Sprintf("stored note %q (%d bytes)", m["title"], len(fmt.Sprint(m["body"])))), nil
		})
	s.AddTool(&mcp.Tool{Name: "fail", Description: "Always fails with isError.", InputSchema: schema(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args(req)
			r := text("the widget is jammed")
			r.IsError = true
			return r, nil
		})
	s.AddTool(&mcp.Tool{Name: "media", Description: "Returns an image and an embedded resource.", InputSchema: schema(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args(req)
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.ImageContent{Data: []byte("\x89PNG fake"), MIMEType: "image/png"},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "note://readme", MIMEType: "text/plain", Text: "embedded text"}},
			}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "progress", Description: "Reports progress twice.", InputSchema: schema(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args(req)
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= 2; i++ {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Message: "step", Progress: float64(i), Total: 2})
				}
				// The client handles notifications on its own goroutine and
				// drops progress that arrives after the result: leave it
				// time to handle these first.
				time.Sleep(500 * time.Millisecond)
			}
			return text("done"), nil
		})
	s.AddTool(&mcp.Tool{Name: "crash", Description: "Exits the server mid-call.", InputSchema: schema(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args(req)
			log.Print("crashing on purpose")
			os.Exit(3)
			return nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "hang", Description: "Blocks until cancelled.", InputSchema: schema(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args(req)
			<-ctx.Done()
			record("cancelled hang")
			return nil, ctx.Err()
		})
	s.AddTool(&mcp.Tool{Name: "grow", Description: "Adds the tool 'late' and removes 'hang' (tools/list_changed).", InputSchema: schema(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args(req)
			s.AddTool(&mcp.Tool{Name: "late", Description: "Added at run time.", InputSchema: schema(`{"type":"object"}`)},
				func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					args(req)
					return text("late tool here"), nil
				})
			s.RemoveTools("hang")
			return text("tools changed"), nil
		})
	if *broken {
		var b strings.Builder
		b.WriteString(`{"type":"object","properties":{`)
		for i := range 3000 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"field_%d":{"type":"string","description":"padding padding"}`, i)
		}
		b.WriteString(`}}`)
		nop := func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("ok"), nil }
		s.AddTool(&mcp.Tool{Name: "huge", Description: "A tool with a huge schema.", InputSchema: schema(b.String())}, nop)
		s.AddTool(&mcp.Tool{Name: "invalid", Description: "A tool with an invalid schema.",
			InputSchema: schema(`{"type":"object","properties":{"x":{"type":"nonsense"}}}`)}, nop)
	}

	if *addr == "" {
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	var handler http.Handler = h
	if *token != "" {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+*token {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	log.Fatal(http.Serve(ln, handler))
}
