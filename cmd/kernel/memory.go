package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/memory/bleveindex"
	"github.com/agentkernel/agentkernel/memory/embeddings"
	"github.com/agentkernel/agentkernel/policy"
	"github.com/agentkernel/agentkernel/serve"
)

// MemoryConfig is memory: (docs/memory.md).
type MemoryConfig struct {
	Enabled bool   `yaml:"enabled"`
	Scope   string `yaml:"scope"`
	Inject  struct {
		MaxTokens     int  `yaml:"max_tokens"`
		K             int  `yaml:"k"`
		WithAssistant bool `yaml:"with_assistant"`
	} `yaml:"inject"`
	Exclude struct {
		Tools []string `yaml:"tools"`
		Paths []string `yaml:"paths"`
	} `yaml:"exclude"`
	Embeddings *struct {
		Model      string `yaml:"model"`
		BaseURL    string `yaml:"base_url"`
		APIKeyEnv  string `yaml:"api_key_env"`
		Dimensions int    `yaml:"dimensions"`
	} `yaml:"embeddings"`
}

// memorySetup is memory once opened: the index beside the store, the
// indexer that feeds it and the retriever that reads it.
type memorySetup struct {
	index     memory.Index
	indexer   *memory.Indexer
	retriever *memory.Retriever
	where     string
}

// memoryIndexPath is where the bleve index of a Badger store lives: beside
// the store's directory, never inside the workspace.
func memoryIndexPath(storeDir string) string {
	return filepath.Join(filepath.Dir(storeDir), filepath.Base(storeDir)+".memory")
}

// openMemory opens the index the store kind picks (Badger: bleve beside
// it; memory: bleve in memory; PostgreSQL: its own index, branch
// memory-pg) and, with index, the embeddings client.
func (a *app) openMemory() (*memorySetup, error) {
	if a.mem != nil {
		return a.mem, nil
	}
	sc, err := a.cfg.storeConfig()
	if err != nil {
		return nil, err
	}
	m := &memorySetup{}
	switch sc.Kind {
	case "memory":
		m.index, err = bleveindex.Open("")
		m.where = "in memory"
	case "postgres":
		ps, ok := a.store.(*postgres.Store)
		if !ok {
			return nil, &ConfigError{File: a.cfg.source(), Field: "memory.enabled", Err: errors.New("the postgres store is not open")}
		}
		m.index, m.where = ps.MemoryIndex(), "in the session database"
	default:
		m.where = memoryIndexPath(sc.Dir)
		m.index, err = bleveindex.Open(m.where)
	}
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, m.index.Close)
	report := func(msg string) { a.log.Warn(msg) }
	m.retriever = &memory.Retriever{Index: m.index, Report: report}
	if e := a.cfg.Memory.Embeddings; e != nil {
		base, keyEnv := e.BaseURL, e.APIKeyEnv
		if base == "" {
			base = a.cfg.Model.BaseURL
		}
		if keyEnv == "" {
			keyEnv = a.cfg.Model.APIKeyEnv
		}
		hc, err := embeddings.EgressClient(base, nil)
		if err != nil {
			return nil, &ConfigError{File: a.cfg.source(), Field: "memory.embeddings.base_url", Err: err}
		}
		c, err := embeddings.New(embeddings.Config{Model: e.Model, BaseURL: base, APIKeyEnv: keyEnv, Dimensions: e.Dimensions, HTTPClient: hc})
		if err != nil {
			return nil, &ConfigError{File: a.cfg.source(), Field: "memory.embeddings", Err: err}
		}
		m.retriever.Embedder = c
	}
	for _, g := range a.cfg.Memory.Exclude.Paths {
		if _, err := path.Match(g, ""); err != nil {
			return nil, &ConfigError{File: a.cfg.source(), Field: "memory.exclude.paths", Err: fmt.Errorf("%q: %w", g, err)}
		}
	}
	exclude, excludeCall := memoryIndexPolicy(a.policyWatcher, a.tools, a.log,
		memoryExclude(a.cfg.path(a.cfg.Workspace), a.cfg.Memory.Exclude.Tools, a.cfg.Memory.Exclude.Paths))
	m.indexer = memory.NewIndexer(memory.IndexerConfig{Index: m.index, Store: a.store, Embedder: m.retriever.Embedder, Report: report,
		Exclude: exclude, ExcludeCall: excludeCall})
	a.mem = m
	return m, nil
}

// wireMemory, when memory.enabled, starts the indexer (stopped by the
// app's Close after a bounded flush), hands it every committed step and
// adds memory's injection hook after the configured before_model hooks.
func (a *app) wireMemory(kc *kernel.Config) error {
	if !a.cfg.Memory.Enabled {
		return nil
	}
	fresh := a.mem == nil
	m, err := a.openMemory()
	if err != nil {
		return err
	}
	if fresh {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); m.indexer.Run(ctx) }()
		a.closers = append(a.closers, func() error {
			fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
			m.indexer.Flush(fctx) // what is not indexed now is caught up next time
			fcancel()
			cancel()
			wg.Wait()
			return nil
		})
	}
	h, err := memory.Hook(memory.InjectConfig{Retriever: m.retriever, Scope: memory.ScopeKind(a.cfg.Memory.Scope),
		Agents: a.cfg.memoryAgentScopes(), Workspace: a.cfg.path(a.cfg.Workspace), K: a.cfg.Memory.Inject.K, MaxTokens: a.cfg.Memory.Inject.MaxTokens, WithAssistant: a.cfg.Memory.Inject.WithAssistant,
		Allow: memoryPolicy(a.policyWatcher, a.cfg.Memory.Scope)})
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	kc.Observe = m.indexer.Observe(kc.Observe)
	if a.chain != nil {
		kc.Points = a.chain.Points(h)
	}
	return nil
}

// memoryScope is memory.scope when memory is enabled (session when
// unset), "" when it is not.
func (cfg *Config) memoryScope() string {
	switch {
	case !cfg.Memory.Enabled:
		return ""
	case cfg.Memory.Scope == "":
		return string(memory.ScopeSession)
	}
	return cfg.Memory.Scope
}

// memoryAgentScopes is every agents.NAME.memory that is set. A broken
// agents: section gives none here: loadAgents reports it, naming the line.
func (cfg *Config) memoryAgentScopes() memory.AgentScopes {
	ac, err := cfg.agentsConfig()
	if err != nil {
		return nil
	}
	out := memory.AgentScopes{}
	for _, ag := range ac.Agents {
		if ag.Memory != "" {
			out[ag.Name] = memory.ScopeKind(ag.Memory)
		}
	}
	return out
}

// loadMemoryTool registers memory_search when memory is enabled. The
// retriever it searches is opened with the store (openMemory), after the
// tools: until then, and in commands that never open it, a call fails
// saying memory is not open.
func (a *app) loadMemoryTool() error {
	if !a.cfg.Memory.Enabled {
		return nil
	}
	t, err := memory.NewSearchTool(memory.SearchToolConfig{
		Searcher: func() memory.Searcher {
			if a.mem == nil || a.mem.retriever == nil {
				return nil
			}
			return a.mem.retriever
		},
		Scope:     memory.ScopeKind(a.cfg.memoryScope()),
		Agents:    a.cfg.memoryAgentScopes(),
		Workspace: a.cfg.path(a.cfg.Workspace),
	})
	if err != nil {
		return &ConfigError{File: a.cfg.source(), Field: "memory.scope", Err: err}
	}
	if err := a.tools.Register(t); err != nil {
		return fmt.Errorf("%s: memory: %w", a.cfg.source(), err)
	}
	return nil
}

// memoryExclude is memory.exclude as the indexer's ExcludeCall (nil when
// nothing is excluded): a tool result is left out when its tool is listed,
// or when a path argument of its call (path, paths, file, dir) or a
// directory above it matches a glob (an absolute path counts from the
// workspace, ws; one outside it is matched as it is). With globs set, a
// result whose call is unknown or whose arguments do not parse is left
// out too.
func memoryExclude(ws string, tools, globs []string) func(*memory.Chunk, *kernel.ToolCall) bool {
	if len(tools) == 0 && len(globs) == 0 {
		return nil
	}
	return func(c *memory.Chunk, call *kernel.ToolCall) bool {
		if slices.Contains(tools, c.Tool) {
			return true
		}
		if len(globs) == 0 {
			return false
		}
		if call == nil {
			return true
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
			return true
		}
		var paths []string
		for _, k := range []string{"path", "paths", "file", "dir"} {
			switch v := args[k].(type) {
			case string:
				paths = append(paths, v)
			case []any:
				for _, e := range v {
					if s, ok := e.(string); ok {
						paths = append(paths, s)
					}
				}
			}
		}
		for _, p := range paths {
			if filepath.IsAbs(p) && ws != "" {
				if rel, err := filepath.Rel(ws, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
					p = rel
				}
			}
			for p = path.Clean(strings.TrimPrefix(filepath.ToSlash(p), "./")); p != "." && p != "/"; p = path.Dir(p) {
				for _, g := range globs {
					if ok, _ := path.Match(g, p); ok {
						return true
					}
				}
			}
		}
		return false
	}
}

// memorySearcher is what GET /v1/memory/search runs: memory's retriever
// (hybrid with embeddings), or nil when memory is off.
func (a *app) memorySearcher() serve.MemorySearcher {
	if !a.cfg.Memory.Enabled || a.mem == nil {
		return nil
	}
	return a.mem.retriever
}

// ---- Policy governs memory (issue 41; docs/memory.md, "Policy") ----

// memoryPolicy is the policy's memory: section as memory's
// InjectConfig.Allow, or nil without a policy file. Each injection is
// ruled on by the policy in force when it happens, so a reload applies to
// the next one. A refusal injects nothing; a drop leaves the hit out. Each
// ruling that changed something is a notice event (source "policy") and,
// with policy.decision_log, a line of the decision log.
func memoryPolicy(w *policy.Watcher, scope string) func(context.Context, *kernel.BeforeModelInput, []memory.Hit) ([]memory.Hit, error) {
	if w == nil {
		return nil
	}
	if scope == "" {
		scope = string(memory.ScopeSession)
	}
	return func(ctx context.Context, in *kernel.BeforeModelInput, hits []memory.Hit) ([]memory.Hit, error) {
		p := w.Policy()
		if p == nil || !p.HasMemoryRules() {
			return hits, nil
		}
		st := in.State()
		var owner string
		now := time.Now()
		if st != nil {
			owner = st.Labels[memory.OwnerLabel]
			if !st.Now.IsZero() {
				now = st.Now
			}
		}
		r := policy.MemoryRetrieval{Scope: scope, Hits: make([]policy.MemoryHit, len(hits))}
		for i, h := range hits {
			c := &h.Chunk
			r.Hits[i] = policy.MemoryHit{Session: c.SessionID, Seq: int(c.Seq), Part: c.Part, Role: c.Role, Tool: c.Tool,
				Source: string(h.Source), Score: h.Score, Rank: i + 1, Age: max(now.Sub(c.Time), 0),
				SameSession: c.SessionID == in.SessionID, SameOwner: c.Owner == owner, Text: c.Text}
		}
		d := p.Memory(ctx, st, r)
		if text := memoryRulingText(&d); text != "" {
			in.Info().Emit(kernel.Notice{Source: "policy", Level: "info", Text: text})
		}
		if d.Refused {
			return nil, nil
		}
		kept := make([]memory.Hit, 0, len(d.Kept))
		for _, rank := range d.Kept {
			kept = append(kept, hits[rank-1])
		}
		return kept, nil
	}
}

// memoryRulingText is the notice of a ruling on memory's injection, ""
// when no rule acted or would have.
func memoryRulingText(d *policy.MemoryDecision) string {
	var parts []string
	if d.Refused {
		parts = append(parts, fmt.Sprintf("memory injection refused by rule %s: %s", d.Rule, d.Message))
	}
	for _, x := range d.Dropped {
		parts = append(parts, fmt.Sprintf("memory hit %d (session %s message %d) dropped by rule %s", x.Rank, x.Session, x.Seq, x.Rule))
	}
	for _, id := range d.WouldRefuse {
		parts = append(parts, "memory injection would be refused by rule "+id+" (dryrun)")
	}
	for _, x := range d.WouldDrop {
		parts = append(parts, fmt.Sprintf("memory hit %d would be dropped by rule %s (dryrun)", x.Rank, x.Rule))
	}
	return strings.Join(parts, "; ")
}

// memoryIndexPolicy adds the policy's exclude rules (memory: rules with
// effect exclude) to memory.exclude (cfgCall, nil when unset): a chunk is
// left out of the index when either says so. Without a policy file it is
// memory.exclude alone. Each chunk is ruled on by the policy in force when
// it is indexed, so a reload applies to what is indexed next. A tool
// result's call is rebuilt through the tool registry as the loop builds
// it (its schema's path arguments, its path resolver), so call.paths is
// what tool rules see; a call of a tool no longer registered falls back
// to the argument naming convention, and arguments that do not parse
// exclude the chunk (fail closed). Dry-run matches and rules that fail
// are logged (warn).
func memoryIndexPolicy(w *policy.Watcher, tools *kernel.Registry, log hclog.Logger, cfgCall func(*memory.Chunk, *kernel.ToolCall) bool) (func(*memory.Chunk) bool, func(*memory.Chunk, *kernel.ToolCall) bool) {
	if w == nil {
		return nil, cfgCall
	}
	rule := func(c *memory.Chunk, call *kernel.ToolCall) bool {
		p := w.Policy()
		if p == nil || !p.HasExcludeRules() {
			return false
		}
		st := &kernel.State{SessionID: c.SessionID, Now: c.Time}
		if c.Owner != "" {
			st.Labels = map[string]string{memory.OwnerLabel: c.Owner}
		}
		var kc *kernel.Call
		if call != nil {
			var err error
			if kc, err = indexedCall(tools, call, st); err != nil {
				log.Warn(fmt.Sprintf("memory: session %s message %d not indexed: the arguments of its call %s do not parse (%v)", c.SessionID, c.Seq, call.ID, err))
				return true
			}
		}
		d := p.Exclude(context.Background(), st, policy.MemoryChunk{Session: c.SessionID, Seq: int(c.Seq), Part: c.Part,
			Role: c.Role, Tool: c.Tool, Text: c.Text, Owner: c.Owner, Workspace: c.Workspace}, kc)
		if d.Err != "" {
			log.Warn(fmt.Sprintf("memory: session %s message %d not indexed: %s", c.SessionID, c.Seq, d.Err))
		}
		for _, id := range d.WouldExclude {
			log.Warn(fmt.Sprintf("memory: session %s message %d part %d would not be indexed by rule %s (dryrun)", c.SessionID, c.Seq, c.Part, id))
		}
		return d.Excluded
	}
	exclude := func(c *memory.Chunk) bool {
		return c.Role != string(kernel.RoleTool) && rule(c, nil)
	}
	excludeCall := func(c *memory.Chunk, call *kernel.ToolCall) bool {
		return (cfgCall != nil && cfgCall(c, call)) || rule(c, call)
	}
	return exclude, excludeCall
}

// indexedCall is the call a tool result answers, as the policy sees a
// call: through the registry when the tool is registered and the
// arguments validate, else with the tool's name alone.
func indexedCall(tools *kernel.Registry, call *kernel.ToolCall, st *kernel.State) (*kernel.Call, error) {
	args := json.RawMessage(call.Arguments)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if tools != nil {
		if c, err := tools.NewCall(call.ID, call.Name, args, st); err == nil {
			return c, nil
		}
	}
	return kernel.NewCall(call.ID, kernel.ToolSpec{Name: call.Name}, args, st)
}
