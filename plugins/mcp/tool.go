package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentkernel/agentkernel/kernel"
)

// listTools lists the server's tools (connecting if needed, every page)
// and converts those the allowlist admits.
func (s *server) listTools(ctx context.Context) ([]kernel.Tool, []Problem, error) {
	remote, err := s.fetchTools(ctx)
	if err != nil {
		return nil, nil, err
	}
	s.h.writeCache(s.cfg, remote)
	tools, problems := s.convertAll(remote)
	return tools, problems, nil
}

// fetchTools lists the server's tools, every page, connecting if needed.
func (s *server) fetchTools(ctx context.Context) ([]*mcp.Tool, error) {
	sess, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	var remote []*mcp.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcp server %s: list tools: %w", s.cfg.Name, err)
		}
		remote = append(remote, t)
	}
	return remote, nil
}

// convertAll converts the tools the allowlist admits and records them
// (and the ones left out) for Servers.
func (s *server) convertAll(remote []*mcp.Tool) ([]kernel.Tool, []Problem) {
	var (
		tools    []kernel.Tool
		problems []Problem
		listed   []ToolStatus
	)
	scratch := kernel.NewRegistry()
	for _, rt := range remote {
		if !s.cfg.allowed(rt.Name) {
			continue
		}
		t, err := s.convert(rt)
		if err == nil {
			err = scratch.Register(t) // name, tier and schema, as the kernel will check them
		}
		if err != nil {
			problems = append(problems, Problem{Server: s.cfg.Name, Tool: rt.Name, Reason: err.Error()})
			continue
		}
		tools = append(tools, t)
		listed = append(listed, ToolStatus{Name: t.spec.Name, Remote: rt.Name, Tier: t.spec.Tier, Hints: hints(rt.Annotations), Description: rt.Description})
	}
	for _, name := range s.cfg.Tools {
		found := false
		for _, rt := range remote {
			found = found || rt.Name == name
		}
		if !found {
			problems = append(problems, Problem{Server: s.cfg.Name, Tool: name, Reason: "listed in tools: but the server does not offer it"})
		}
	}
	s.mu.Lock()
	s.listed, s.problems = listed, problems
	s.mu.Unlock()
	return tools, problems
}

// convert makes a kernel tool of a server's tool.
func (s *server) convert(rt *mcp.Tool) (*tool, error) {
	schema, err := json.Marshal(rt.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("inputSchema does not encode as JSON: %w", err)
	}
	if len(schema) > s.cfg.MaxSchemaBytes {
		return nil, fmt.Errorf("inputSchema is %d bytes, more than max_schema_bytes (%d)", len(schema), s.cfg.MaxSchemaBytes)
	}
	if string(schema) == "null" {
		schema = nil
	}
	tier, ok := s.cfg.Tiers[rt.Name]
	if !ok {
		tier = s.cfg.DefaultTier
	}
	desc := rt.Description
	if desc == "" {
		desc = rt.Title
	}
	tags := []string{"mcp"}
	for _, h := range hints(rt.Annotations) {
		tags = append(tags, "hint:"+h)
	}
	return &tool{s: s, remote: rt.Name, spec: kernel.ToolSpec{
		Name: s.cfg.Name + "." + rt.Name, Description: desc, Schema: schema, Tier: tier, Tags: tags,
		Timeout: s.cfg.Timeout.D(), Source: "mcp:" + s.cfg.Name,
	}}, nil
}

// hints renders a tool's annotations: shown to the operator, never trusted.
func hints(a *mcp.ToolAnnotations) []string {
	if a == nil {
		return nil
	}
	var out []string
	if a.ReadOnlyHint {
		out = append(out, "read_only")
	}
	if a.DestructiveHint != nil && *a.DestructiveHint && !a.ReadOnlyHint {
		out = append(out, "destructive")
	}
	if a.IdempotentHint {
		out = append(out, "idempotent")
	}
	if a.OpenWorldHint != nil && *a.OpenWorldHint {
		out = append(out, "open_world")
	}
	return out
}

// tool is one tool of an MCP server. Safe for concurrent use.
type tool struct {
	s      *server
	remote string
	spec   kernel.ToolSpec
}

func (t *tool) Spec() kernel.ToolSpec { return t.spec }

// Call sends tools/call with the validated arguments. Progress
// notifications become the call's progress; when ctx ends first, the SDK
// sends notifications/cancelled. A result with isError is a result the
// model reads as an error; a server that dies during the call is an error
// (the next call restarts it).
func (t *tool) Call(ctx context.Context, args json.RawMessage) (kernel.Result, error) {
	sess, err := t.s.session(ctx)
	if err != nil {
		return kernel.Result{}, &kernel.ToolError{Tool: t.spec.Name, Code: "unavailable", Err: err}
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	params := &mcp.CallToolParams{Name: t.remote, Arguments: args}
	tok, done := t.s.withProgress(func(text string) { kernel.ReportProgress(ctx, text) })
	defer done()
	params.SetProgressToken(tok)
	injectTraceContext(ctx, params.Meta)
	res, err := sess.CallTool(ctx, params)
	if err != nil {
		if ctx.Err() != nil {
			return kernel.Result{}, ctx.Err()
		}
		var werr error = err
		disconnected := errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed)
		if t.s.awaitGone(sess, goneWait(disconnected)) {
			werr = fmt.Errorf("mcp server %s went away during the call (%w); the next call restarts it", t.s.cfg.Name, err)
			if tail := t.s.stderr.lastLines(); tail != "" {
				werr = fmt.Errorf("%w; its stderr ends: %s", werr, tail)
			}
		}
		return kernel.Result{}, &kernel.ToolError{Tool: t.spec.Name, Code: "tool_error", Err: werr}
	}
	t.s.answered()
	return toResult(res, t.s.cfg.MaxOutputBytes), nil
}

// goneWait is how long a failed call waits to learn whether the server
// died: long when the error says the connection ended, a moment otherwise.
func goneWait(disconnected bool) time.Duration {
	if disconnected {
		return 10 * time.Second
	}
	return 50 * time.Millisecond
}

// toResult maps an MCP result to the text the model reads: text as is,
// embedded text resources with their URI, structured content as JSON when
// no text carries it, and placeholders for images, audio and blobs (the
// kernel's results are text).
func toResult(res *mcp.CallToolResult, max int) kernel.Result {
	var b strings.Builder
	add := func(s string) {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	texts := map[string]bool{}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			add(c.Text)
			texts[strings.TrimSpace(c.Text)] = true
		case *mcp.ImageContent:
			add(fmt.Sprintf("[image: %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			add(fmt.Sprintf("[audio: %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			add(fmt.Sprintf("[resource link: %s %s %s]", c.URI, c.Name, c.MIMEType))
		case *mcp.EmbeddedResource:
			r := c.Resource
			switch {
			case r == nil:
			case r.Blob != nil:
				add(fmt.Sprintf("[resource %s: %s, %d bytes, not shown]", r.URI, r.MIMEType, len(r.Blob)))
			default:
				add(fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text))
			}
		default:
			add(fmt.Sprintf("[%T content, not shown]", c))
		}
	}
	if res.StructuredContent != nil {
		if js, err := json.Marshal(res.StructuredContent); err == nil && !texts[string(js)] {
			add(string(js))
		}
	}
	out := b.String()
	if len(out) > max {
		out = out[:max] + fmt.Sprintf("\n[output cut at %d bytes]", max)
	}
	return kernel.Result{Content: out, IsError: res.IsError}
}

var _ kernel.Tool = (*tool)(nil)
