package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentkernel/agentkernel/kernel"
)

// SearchToolName is the name of the memory_search built-in tool.
const SearchToolName = "memory_search"

// Limits of memory_search.
const (
	searchDefaultK = 5
	searchMaxK     = 20
	// searchMaxBytes caps the tool's answer; hits past it are left out,
	// saying how many.
	searchMaxBytes = 32 << 10
)

// ScopeOff, as an agent's memory scope (AgentScopes), turns memory off for
// the agent: nothing is injected into its requests and memory_search
// refuses its calls.
const ScopeOff ScopeKind = "off"

// width orders the scope kinds by how much they see: a session's chunks
// are among its workspace's, which are among its owner's.
func (k ScopeKind) width() int {
	switch k {
	case ScopeSession:
		return 1
	case ScopeWorkspace:
		return 2
	case ScopeOwner:
		return 3
	}
	return 0
}

// AgentScopes maps an agent's name to its memory scope (agents.NAME.memory
// in kernel.yaml): a kind, or ScopeOff. An agent it does not name has the
// configured memory.scope.
type AgentScopes map[string]ScopeKind

// For returns the scope of agent's runs: its own, or def; ScopeOff when
// memory is off for it.
func (a AgentScopes) For(agent string, def ScopeKind) ScopeKind {
	if k, ok := a[agent]; ok && k != "" {
		return k
	}
	return def
}

// Searcher is what memory_search and the injection hook search: a
// *Retriever.
type Searcher interface {
	Search(ctx context.Context, s Scope, q string, k int) ([]Hit, error)
}

// SearchToolConfig configures SearchTool.
type SearchToolConfig struct {
	// Searcher returns what to search when a call runs (the retriever is
	// opened with the store, after the tools are registered); nil, or a
	// nil result, fails the call.
	Searcher func() Searcher
	// Scope is the configured memory.scope (default session): the widest
	// scope a call may ask for, and the scope of a call that asks for none.
	Scope ScopeKind
	// Agents narrows (or widens, or turns off) the scope per agent.
	Agents AgentScopes
	// Workspace is the workspace directory, as the indexer records it
	// (the session context's), for the workspace scope.
	Workspace string
}

// SearchTool is the memory_search built-in tool: the model searches
// memory on purpose, through the one pipeline (schema, hooks, policy), as
// it calls any tool. The session and its owner come from the kernel
// (kernel.CallSession), never from the arguments: a call sees the chunks
// of its own session, of its owner's sessions run in this workspace, or
// of all its owner's sessions, and never a scope wider than the
// configured one. It is read-only and safe for concurrent use.
type SearchTool struct{ cfg SearchToolConfig }

// NewSearchTool returns memory_search.
func NewSearchTool(cfg SearchToolConfig) (*SearchTool, error) {
	if cfg.Scope == "" {
		cfg.Scope = ScopeSession
	}
	if cfg.Scope.width() == 0 {
		return nil, fmt.Errorf("memory_search: scope %q (want session, owner or workspace)", cfg.Scope)
	}
	return &SearchTool{cfg: cfg}, nil
}

type searchArgs struct {
	Query string    `json:"query"`
	K     int       `json:"k"`
	Scope ScopeKind `json:"scope"`
}

// Spec describes memory_search.
func (t *SearchTool) Spec() kernel.ToolSpec {
	return kernel.ToolSpec{
		Name: SearchToolName,
		Description: "Search memory: what earlier messages of this session and, when the scope allows, of your other " +
			"sessions said (user prompts, answers and tool results, as stored, secrets scrubbed). Full text " +
			"(English stemming), with vectors when configured. Each hit says where it comes from: " +
			"[session, message, role, time]. Scope session is this session; workspace your sessions in this " +
			"workspace; owner all your sessions. A scope wider than the configured one is refused.",
		Schema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "What to look for, in words."},
    "k": {"type": "integer", "minimum": 1, "maximum": %d, "description": "How many hits at most. Default %d."},
    "scope": {"enum": ["session", "workspace", "owner"], "description": "Where to search. Default: the configured memory scope."}
  },
  "required": ["query"],
  "additionalProperties": false
}`, searchMaxK, searchDefaultK)),
		Tier:   kernel.TierReadOnly,
		Tags:   []string{"memory", "read", "search"},
		Source: "builtin",
	}
}

// ErrNoSession is memory_search called outside a session the kernel runs.
var ErrNoSession = errors.New("memory_search: the call carries no session (it runs only inside a kernel run)")

// Call searches memory in the session's scope.
func (t *SearchTool) Call(ctx context.Context, raw json.RawMessage) (kernel.Result, error) {
	var a searchArgs
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return kernel.Result{}, fmt.Errorf("memory_search: arguments: %w", err)
	}
	if strings.TrimSpace(a.Query) == "" {
		return kernel.Result{}, errors.New("memory_search: query is empty: say what to look for")
	}
	if a.K == 0 {
		a.K = searchDefaultK
	}
	if a.K < 0 || a.K > searchMaxK {
		return kernel.Result{}, fmt.Errorf("memory_search: k is %d: want 1 to %d", a.K, searchMaxK)
	}
	sess, ok := kernel.CallSession(ctx)
	if !ok {
		return kernel.Result{}, ErrNoSession
	}
	widest := t.cfg.Agents.For(sess.Agent.Name, t.cfg.Scope)
	if widest == ScopeOff {
		return kernel.Result{}, fmt.Errorf("memory_search: memory is off for agent %q", sess.Agent.Name)
	}
	if a.Scope == "" {
		a.Scope = widest
	}
	if a.Scope.width() == 0 {
		return kernel.Result{}, fmt.Errorf("memory_search: scope %q: want session, workspace or owner", a.Scope)
	}
	if a.Scope.width() > widest.width() {
		return kernel.Result{}, fmt.Errorf("memory_search: scope %s is wider than this agent's memory scope, %s: search %s or narrower", a.Scope, widest, widest)
	}
	// The owner always comes from the session the kernel runs, never
	// from the call: every scope filters on it (Scope).
	s := Scope{Kind: a.Scope, SessionID: sess.SessionID, Owner: sess.Labels[OwnerLabel], Workspace: t.cfg.Workspace}
	if s.Kind == ScopeWorkspace && s.Workspace == "" {
		return kernel.Result{}, errors.New("memory_search: no workspace is known: search scope session or owner")
	}
	var sr Searcher
	if t.cfg.Searcher != nil {
		sr = t.cfg.Searcher()
	}
	if sr == nil {
		return kernel.Result{}, errors.New("memory_search: memory is not open")
	}
	hits, err := sr.Search(ctx, s, a.Query, a.K)
	if err != nil {
		return kernel.Result{}, fmt.Errorf("memory_search: %w", err)
	}
	return kernel.Result{Content: formatHits(s, a.Query, hits)}, nil
}

// formatHits is memory_search's answer: a line saying what was searched,
// then each hit (inside s: an index's answer outside it is dropped, as a
// second guard) with its provenance and its text as indexed.
func formatHits(s Scope, q string, hits []Hit) string {
	kept := hits[:0:0]
	for _, h := range hits {
		if s.Match(&h.Chunk) {
			kept = append(kept, h)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d hit(s) in scope %s for %s", len(kept), s.Kind, strconv.Quote(q))
	if len(kept) == 0 {
		b.WriteString(": nothing found.")
		return b.String()
	}
	b.WriteString(", best first:")
	for i, h := range kept {
		line := "\n- [" + provenanceOf(&h.Chunk) + "] " + strings.Join(strings.Fields(h.Chunk.Text), " ")
		if b.Len()+len(line) > searchMaxBytes {
			fmt.Fprintf(&b, "\n(%d more hit(s) left out: the answer is capped at %d bytes; ask for fewer, or a narrower query)", len(kept)-i, searchMaxBytes)
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

// provenanceOf is a chunk's "session S message N(.part), role( tool), time".
func provenanceOf(c *Chunk) string {
	where := fmt.Sprintf("session %s message %d", c.SessionID, c.Seq)
	if c.Part > 0 {
		where += "." + strconv.Itoa(c.Part)
	}
	who := c.Role
	if c.Tool != "" {
		who += " " + c.Tool
	}
	return where + ", " + who + ", " + c.Time.UTC().Format("2006-01-02 15:04 UTC")
}

var _ kernel.Tool = (*SearchTool)(nil)
