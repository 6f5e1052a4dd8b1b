package serve

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/memory"
)

// MemorySearcher answers GET /v1/memory/search: memory's retrieval (hybrid
// when embeddings are configured) or an index's full-text search
// (TextSearch). The server builds every scope itself, always with the
// key's owner: a searcher never sees a scope the key could not read.
type MemorySearcher interface {
	Search(ctx context.Context, s memory.Scope, q string, k int) ([]memory.Hit, error)
}

// TextSearch is a MemorySearcher that runs ix's full-text search.
func TextSearch(ix memory.Index) MemorySearcher { return textSearch{ix} }

type textSearch struct{ ix memory.Index }

func (t textSearch) Search(ctx context.Context, s memory.Scope, q string, k int) ([]memory.Hit, error) {
	return t.ix.SearchText(ctx, s, q, k)
}

// memoryHit is one hit as the API shows it: the chunk's text and its
// provenance (never its vector).
type memoryHit struct {
	Session string        `json:"session"`
	Seq     uint64        `json:"seq"`
	Part    int           `json:"part"`
	Role    string        `json:"role"`
	Tool    string        `json:"tool,omitempty"`
	Time    time.Time     `json:"time"`
	Text    string        `json:"text"`
	Score   float64       `json:"score"`
	Rank    int           `json:"rank"`
	Source  memory.Source `json:"source"`
}

// searchMemory answers GET /v1/memory/search?q=&scope=session|owner&session=&limit=.
// The read scope is enough: a hit is text of one of the key's own
// sessions, which GET /v1/sessions/{id}/messages already shows it.
func (s *Server) searchMemory(w http.ResponseWriter, r *http.Request, k *Key) error {
	if s.cfg.Memory == nil {
		return errorf(codeNotImplemented, "memory is not configured on this server (docs/memory.md)")
	}
	q := r.URL.Query().Get("q")
	if strings.TrimSpace(q) == "" {
		return badField("q", "query parameter q is empty: the text to search for")
	}
	if len(q) > 4096 {
		return badField("q", "query parameter q is %d bytes, at most 4096", len(q))
	}
	limit, err := queryInt(r, "limit", 10, 1, 50)
	if err != nil {
		return err
	}
	scope := memory.Scope{Owner: k.Owner()}
	sid := r.URL.Query().Get("session")
	switch kind := r.URL.Query().Get("scope"); kind {
	case "", string(memory.ScopeSession):
		if sid == "" {
			return badField("session", "scope=session needs session=ID (or scope=owner for every session of the key's owner)")
		}
		// A session of another owner is not found, as everywhere else.
		if _, err := s.ownedHead(r.Context(), k, sid); err != nil {
			return err
		}
		scope.Kind, scope.SessionID = memory.ScopeSession, sid
	case string(memory.ScopeOwner):
		if sid != "" {
			return badField("session", "scope=owner searches every session of the key's owner: leave session out")
		}
		scope.Kind = memory.ScopeOwner
	default:
		return badField("scope", "scope %q: want session or owner", kind)
	}
	hits, err := s.cfg.Memory.Search(r.Context(), scope, q, limit)
	if err != nil {
		return err
	}
	out := struct {
		Scope string      `json:"scope"`
		Hits  []memoryHit `json:"hits"`
	}{Scope: string(scope.Kind), Hits: []memoryHit{}}
	for _, h := range hits {
		// The searcher filtered on the owner; a hit of another owner would
		// be its bug, and is dropped, never shown.
		if !scope.Match(&h.Chunk) {
			s.logError("memory search: the searcher returned chunk %s outside the scope %s/%s; dropped", h.Chunk.ID, scope.Kind, scope.Owner)
			continue
		}
		c := h.Chunk
		out.Hits = append(out.Hits, memoryHit{Session: c.SessionID, Seq: c.Seq, Part: c.Part, Role: c.Role, Tool: c.Tool,
			Time: c.Time, Text: c.Text, Score: h.Score, Rank: len(out.Hits) + 1, Source: h.Source})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
