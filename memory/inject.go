package memory

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentkernel/agentkernel/hooks"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/tokenizer"
)

// HookName is the name of memory's before_model hook: the notes of the
// messages it adds and the context breakdown name it.
const HookName = "memory"

// Header opens every message memory injects.
const Header = "Relevant context from memory (earlier messages, with where they come from):"

// DefaultInjectTokens is memory.inject.max_tokens when unset.
const DefaultInjectTokens = 512

// InjectConfig configures the injection hook. The zero value of each field
// but Retriever means its default.
type InjectConfig struct {
	Retriever *Retriever
	// Scope is the kind of scope searched (default session). The session,
	// owner (label serve.owner) and Workspace come from the run.
	Scope     ScopeKind
	Workspace string
	// K is how many hits are considered (default 8).
	K int
	// MaxTokens bounds the injected message, counted by Count (default
	// DefaultInjectTokens).
	MaxTokens int
	// Count counts tokens (default the o200k_base encoding).
	Count func(string) int
	// WithAssistant adds the last assistant answer to the query.
	WithAssistant bool
	// Agents gives an agent a scope of its own, or turns memory off for
	// it (ScopeOff): by the name of the agent the run's session runs.
	Agents AgentScopes
	// Allow, when set, decides whether the hits are injected (policy:
	// a rule may refuse); it may also drop hits by returning fewer.
	Allow func(ctx context.Context, in *kernel.BeforeModelInput, hits []Hit) ([]Hit, error)
}

// Hook returns memory's before_model hook: before each model request it
// searches memory with the latest user prompt (and, when configured, the
// last answer), leaves out chunks already in the request (the session's
// own messages of the window and chunks an earlier injection of memory
// holds), and adds one system message listing the best chunks with their
// provenance (session, message, role, time), inside MaxTokens. The
// message is stored with the answer (kernel.BeforeModelReply.Context), so
// a replay or a resumed session sends the same bytes. A failed search
// fails the hook open: the request goes out without memory.
func Hook(cfg InjectConfig) (*hooks.PointHook, error) {
	if cfg.Retriever == nil {
		return nil, fmt.Errorf("memory hook: no retriever")
	}
	if cfg.Scope == "" {
		cfg.Scope = ScopeSession
	}
	if cfg.K <= 0 {
		cfg.K = 8
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultInjectTokens
	}
	if cfg.Count == nil {
		enc, err := tokenizer.Get("o200k_base")
		if err != nil {
			return nil, err
		}
		cfg.Count = enc.Count
	}
	fn := func(ctx context.Context, pin hooks.PointInput) (hooks.Reply, error) {
		in, ok := pin.(*kernel.BeforeModelInput)
		if !ok {
			return hooks.Reply{}, nil
		}
		text, err := cfg.inject(ctx, in)
		return hooks.Reply{Context: text}, err
	}
	return hooks.At(kernel.PointBeforeModel, HookName, fn, hooks.Fail(hooks.FailOpen))
}

// Query is the search text of a request: its latest user prompt, and
// with assistant its last answer.
func Query(msgs []kernel.Message, assistant bool) string {
	var user, answer string
	for i := len(msgs) - 1; i >= 0 && user == ""; i-- {
		switch m := &msgs[i]; m.Role {
		case kernel.RoleUser:
			user = m.Content
		case kernel.RoleAssistant:
			if answer == "" && m.Failed == "" {
				answer = m.Content
			}
		}
	}
	if assistant && answer != "" {
		return user + "\n" + answer
	}
	return user
}

func (cfg *InjectConfig) inject(ctx context.Context, in *kernel.BeforeModelInput) (string, error) {
	q := Query(in.Messages, cfg.WithAssistant)
	if strings.TrimSpace(q) == "" {
		return "", nil
	}
	s := Scope{Kind: cfg.Scope, SessionID: in.SessionID, Workspace: cfg.Workspace}
	if st := in.State(); st != nil {
		s.Owner = st.Labels[OwnerLabel]
		s.Kind = cfg.Agents.For(st.Agent.Name, cfg.Scope)
	}
	if s.Kind == ScopeOff {
		return "", nil
	}
	if s.Kind == ScopeWorkspace && s.Workspace == "" {
		s.Kind = ScopeOwner // no workspace known: the owner's sessions
	}
	// Twice K, so that the hits the request already holds, dropped
	// next, do not leave fewer than K when there are more.
	hits, err := cfg.Retriever.Search(ctx, s, q, 2*cfg.K)
	if err != nil {
		return "", err
	}
	hits = cut(Unseen(in.SessionID, in.Messages, hits), cfg.K)
	if cfg.Allow != nil && len(hits) > 0 {
		if hits, err = cfg.Allow(ctx, in, hits); err != nil {
			return "", err
		}
	}
	return Format(hits, cfg.MaxTokens, cfg.Count), nil
}

// provenance matches a snippet's provenance in an injected message.
var provenance = regexp.MustCompile(`(?m)^- \[session (\S+) message (\d+)(?:\.(\d+))?, `)

// Unseen drops the hits already in msgs: messages of session sid the
// request holds, and chunks an earlier memory message of it lists.
func Unseen(sid string, msgs []kernel.Message, hits []Hit) []Hit {
	seqs := map[uint64]bool{}
	seen := map[string]bool{}
	for i := range msgs {
		m := &msgs[i]
		if m.Seq != 0 {
			seqs[m.Seq] = true
		}
		if m.Role == kernel.RoleSystem && strings.HasPrefix(m.Content, Header) {
			for _, g := range provenance.FindAllStringSubmatch(m.Content, -1) {
				seq, _ := strconv.ParseUint(g[2], 10, 64)
				part, _ := strconv.Atoi(g[3])
				seen[ChunkID(g[1], seq, part)] = true
			}
		}
	}
	out := hits[:0:0]
	for _, h := range hits {
		if h.Chunk.SessionID == sid && seqs[h.Chunk.Seq] || seen[h.Chunk.ID] {
			continue
		}
		out = append(out, h)
	}
	for i := range out {
		out[i].Rank = i + 1
	}
	return out
}

// Format writes the injected message: Header, then one line per hit in
// rank order, "- [session S message N(.part), role(tool), time] text",
// as many as fit in maxTokens (counted by count); a snippet that does not
// fit whole is shortened to fit, and one that cannot is left out. No hit
// that fits: "".
func Format(hits []Hit, maxTokens int, count func(string) int) string {
	if len(hits) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(Header)
	used := count(Header)
	n := 0
	for _, h := range hits {
		c := &h.Chunk
		head := "\n- [" + provenanceOf(c) + "] "
		body := strings.Join(strings.Fields(c.Text), " ")
		line := head + body
		cost := count(line)
		if used+cost > maxTokens {
			room := maxTokens - used - count(head) - 1
			if room < 16 {
				continue
			}
			body = shorten(body, room, count)
			line = head + body + "…"
			cost = count(line)
			if used+cost > maxTokens {
				continue
			}
		}
		b.WriteString(line)
		used += cost
		n++
	}
	if n == 0 {
		return ""
	}
	return b.String()
}

// shorten cuts s to at most tokens tokens, at a word boundary.
func shorten(s string, tokens int, count func(string) int) string {
	words := strings.Fields(s)
	lo, hi := 0, len(words)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if count(strings.Join(words[:mid], " ")) <= tokens {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return strings.Join(words[:lo], " ")
}
