package serve

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/export"
)

// Labels serve keeps on the sessions it creates. Metadata a client sets is
// kept under "meta.<key>".
const (
	labelOwner     = "serve.owner"
	labelPrincipal = "serve.principal"
	metaPrefix     = "meta."
)

// sessionView is a session as the API shows it.
type sessionView struct {
	ID       string            `json:"id"`
	Title    string            `json:"title"`
	Status   kernel.Status     `json:"status"`
	Model    string            `json:"model"`
	Created  time.Time         `json:"created"`
	Updated  time.Time         `json:"updated"`
	Metadata map[string]string `json:"metadata"`
	Totals   totalsView        `json:"totals"`
	// Agent is the named agent (or "pipeline:NAME") the session runs; empty
	// for the configuration's top-level agent.
	Agent string `json:"agent,omitempty"`
	// Parent links a child session (an agent call's or a pipeline step's)
	// to the call of the session that made it.
	Parent *kernel.ParentLink `json:"parent,omitempty"`
	// Pending and ActiveRun are set by GET of one session.
	Pending   *approvalView `json:"pending_approval,omitempty"`
	ActiveRun *runRec       `json:"active_run,omitempty"`
}

type totalsView struct {
	Messages uint64       `json:"messages"`
	Runs     int          `json:"runs"`
	Turns    int          `json:"turns"`
	Usage    kernel.Usage `json:"usage"`
	CostUSD  float64      `json:"cost_usd"`
}

func (s *Server) view(ctx context.Context, m *kernel.SessionMeta) sessionView {
	v := sessionView{ID: m.ID, Title: m.Title, Status: s.status(ctx, m), Model: m.Model, Created: m.Created, Updated: m.Updated,
		Metadata: map[string]string{},
		Totals:   totalsView{Messages: m.LastSeq, Runs: m.Runs, Turns: m.Turns, Usage: m.Usage, CostUSD: m.CostUSD}}
	if m.Agent != kernel.DefaultAgentName {
		v.Agent = m.Agent
	}
	if m.Parent != nil {
		// A child runs inside its parent's run, never on its own: its
		// status is the store's.
		v.Parent, v.Status = m.Parent, m.Status
	}
	for k, val := range m.Labels {
		if name, ok := strings.CutPrefix(k, metaPrefix); ok {
			v.Metadata[name] = val
		}
	}
	return v
}

// status is the session's status as the API shows it.
func (s *Server) status(ctx context.Context, m *kernel.SessionMeta) kernel.Status {
	if m.Status == kernel.StatusRunning {
		if _, ok := s.runs.activeRun(ctx, m.ID); !ok {
			return statusInterrupted
		}
	}
	return m.Status
}

// owned loads session id for key k: a session of another owner is not
// found, exactly as one that does not exist.
func (s *Server) owned(ctx context.Context, k *Key, id string) (*kernel.Session, error) {
	return s.ownedBy(ctx, k, id, s.cfg.Store.Load)
}

// ownedHead is owned for a request that reads only the session's metadata
// and pending approval (a stream's start, a run's 202): its messages are
// not read when the store can leave them (kernel.SessionHeadLoader), so
// the check costs the same on a long session as on a new one.
// Why: RATIONALE.md, "A run through kernel serve, second round (issue 45)".
func (s *Server) ownedHead(ctx context.Context, k *Key, id string) (*kernel.Session, error) {
	return s.ownedBy(ctx, k, id, s.loadHead)
}

// loadHead loads session id without its messages where the store can
// (kernel.SessionHeadLoader), else whole.
func (s *Server) loadHead(ctx context.Context, id string) (*kernel.Session, error) {
	if h, ok := s.cfg.Store.(kernel.SessionHeadLoader); ok {
		return h.LoadHead(ctx, id)
	}
	return s.cfg.Store.Load(ctx, id)
}

// ownedBy is owned, loading the session with load.
func (s *Server) ownedBy(ctx context.Context, k *Key, id string, load func(context.Context, string) (*kernel.Session, error)) (*kernel.Session, error) {
	sess, err := load(ctx, id)
	if errors.Is(err, kernel.ErrSessionNotFound) || err == nil && s.ownerOf(ctx, &sess.Meta) != k.Owner() {
		return nil, notFound("session", id)
	}
	if err != nil {
		return nil, err
	}
	return sess, nil
}

// ownerOf is the owner of a session: its label, or for a child session
// (an agent call's, which the kernel made and labelled nothing) its top
// ancestor's. "" when there is none.
func (s *Server) ownerOf(ctx context.Context, m *kernel.SessionMeta) string {
	for range kernel.DefaultMaxDepth * 4 { // deeper than any allowed chain
		if m.Parent == nil {
			return m.Labels[labelOwner]
		}
		p, err := s.loadHead(ctx, m.Parent.SessionID)
		if err != nil {
			return ""
		}
		m = &p.Meta
	}
	return ""
}

// ownedToAct is owned for a request that acts on the session (runs or
// resumes it, decides its approval, posts to it, cancels or deletes it):
// a key restricted to other agents (agent:NAME scopes) is refused with
// 403; a child session (readable by its parent's owner) with 409, as it
// runs only through its parent.
func (s *Server) ownedToAct(ctx context.Context, k *Key, id string) (*kernel.Session, error) {
	return s.ownedToActBy(ctx, k, id, s.owned)
}

// ownedToActHead is ownedToAct for a request that reads only the
// session's metadata and pending approval (see ownedHead).
func (s *Server) ownedToActHead(ctx context.Context, k *Key, id string) (*kernel.Session, error) {
	return s.ownedToActBy(ctx, k, id, s.ownedHead)
}

// ownedToActBy is ownedToAct, finding the session with find.
func (s *Server) ownedToActBy(ctx context.Context, k *Key, id string, find func(context.Context, *Key, string) (*kernel.Session, error)) (*kernel.Session, error) {
	sess, err := find(ctx, k, id)
	if err != nil {
		return nil, err
	}
	if p := sess.Meta.Parent; p != nil {
		return nil, conflict(sess.Meta.Status, "session %s is a child session (agent %s, for call %s of session %s): it runs only through its parent", sess.Meta.ID, sess.Meta.Agent, p.CallID, p.SessionID)
	}
	if err := checkAgent(k, sess.Meta.Agent); err != nil {
		return nil, err
	}
	return sess, nil
}

var metaKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

type createSessionReq struct {
	Title    string            `json:"title"`
	Metadata map[string]string `json:"metadata"`
	// Agent names the agent (or "pipeline:NAME") that runs the session.
	Agent string `json:"agent"`
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, k *Key) error {
	var req createSessionReq
	if err := s.decodeBody(r, &req); err != nil {
		return err
	}
	if len(req.Title) > 200 {
		return badField("title", "title is %d bytes; at most 200", len(req.Title))
	}
	if len(req.Metadata) > 32 {
		return badField("metadata", "metadata has %d keys; at most 32", len(req.Metadata))
	}
	if req.Agent != "" && s.agent(req.Agent) == nil {
		return badField("agent", "no agent %q; the agents are: %s (GET /v1/agents)", req.Agent, s.agentNames())
	}
	if err := checkAgent(k, req.Agent); err != nil {
		return err
	}
	labels := map[string]string{labelOwner: k.Owner(), labelPrincipal: k.Name}
	for name, v := range req.Metadata {
		if !metaKeyRE.MatchString(name) {
			return badField("metadata."+name, "metadata key %q: use 1-64 letters, digits, '_' or '-'", name)
		}
		if len(v) > 1024 {
			return badField("metadata."+name, "metadata value of %q is %d bytes; at most 1024", name, len(v))
		}
		// What a client types is scrubbed on the way in, as tool results
		// are: an aks_ key pasted into a label is not stored as typed.
		labels[metaPrefix+name] = s.cfg.Scrub(v)
	}
	now := time.Now().UTC()
	meta := kernel.SessionMeta{ID: kernel.NewID(), Title: s.cfg.Scrub(req.Title), Status: kernel.StatusIdle, Created: now, Updated: now,
		Labels: labels, Context: s.cfg.SessionContext, Agent: req.Agent}
	if err := s.cfg.Store.Commit(r.Context(), meta.ID, kernel.Step{Meta: meta}); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, s.view(r.Context(), &meta))
	return nil
}

// listCursor is the position after which a page of sessions starts.
type listCursor struct {
	Updated time.Time `json:"u"`
	ID      string    `json:"i"`
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, k *Key) error {
	limit, err := queryInt(r, "limit", 50, 1, 500)
	if err != nil {
		return err
	}
	status := r.URL.Query().Get("status")
	if status != "" && !isSessionStatus(status) {
		return badField("status", "status %q: want one of %s", status, strings.Join(sessionStatusNames(), ", "))
	}
	agent, byAgent := r.URL.Query().Get("agent"), r.URL.Query().Has("agent")
	if agent == kernel.DefaultAgentName {
		agent = ""
	}
	if byAgent {
		if agent != "" && s.agent(agent) == nil {
			return badField("agent", "no agent %q; the agents are: %s (GET /v1/agents), or default for the top-level agent", agent, s.agentNames())
		}
		if err := checkAgent(k, agent); err != nil {
			return err
		}
	}
	var after *listCursor
	if c := r.URL.Query().Get("cursor"); c != "" {
		after = new(listCursor)
		if err := decodeCursor(c, after); err != nil {
			return badField("cursor", "cursor %q is not one this server gave out", c)
		}
	}
	metas, err := s.cfg.Store.List(r.Context())
	if err != nil {
		return err
	}
	slices.SortFunc(metas, func(a, b kernel.SessionMeta) int {
		if c := b.Updated.Compare(a.Updated); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	out := struct {
		Sessions   []sessionView `json:"sessions"`
		NextCursor string        `json:"next_cursor,omitempty"`
	}{Sessions: []sessionView{}}
	for i := range metas {
		m := &metas[i]
		if m.Labels[labelOwner] != k.Owner() || !agentAllowed(k, m.Agent) || byAgent && sessionAgent(m) != agent {
			continue
		}
		if after != nil && (m.Updated.After(after.Updated) || m.Updated.Equal(after.Updated) && m.ID <= after.ID) {
			continue
		}
		v := s.view(r.Context(), m)
		if status != "" && string(v.Status) != status {
			continue
		}
		if len(out.Sessions) == limit {
			out.NextCursor = encodeCursor(listCursor{Updated: out.Sessions[limit-1].Updated, ID: out.Sessions[limit-1].ID})
			break
		}
		out.Sessions = append(out.Sessions, v)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, k *Key) error {
	sess, err := s.owned(r.Context(), k, r.PathValue("id"))
	if err != nil {
		return err
	}
	v := s.view(r.Context(), &sess.Meta)
	if sess.Pending != nil {
		v.Pending = s.approval(r.Context(), sess)
	}
	if run, ok := s.runs.activeRun(r.Context(), sess.Meta.ID); ok {
		v.ActiveRun = &run
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, k *Key) error {
	sess, err := s.ownedToActHead(r.Context(), k, r.PathValue("id"))
	if err != nil {
		return err
	}
	del, ok := s.cfg.Store.(kernel.SessionDeleter)
	if !ok {
		return errorf(codeNotImplemented, "this store cannot delete sessions")
	}
	if run, ok := s.runs.activeRun(r.Context(), sess.Meta.ID); ok {
		return conflict(runRunning, "session %s has a run in flight (%s): cancel it first", sess.Meta.ID, run.ID)
	}
	if err := del.Delete(r.Context(), sess.Meta.ID); err != nil {
		if errors.Is(err, kernel.ErrSessionNotFound) {
			return notFound("session", sess.Meta.ID)
		}
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request, k *Key) error {
	sess, err := s.owned(r.Context(), k, r.PathValue("id"))
	if err != nil {
		return err
	}
	after, err := queryInt(r, "after", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	msgs := []kernel.Message{}
	for _, m := range sess.Messages {
		if m.Seq > uint64(after) && len(msgs) < limit {
			msgs = append(msgs, m)
		}
	}
	out := struct {
		Messages []kernel.Message `json:"messages"`
		LastSeq  uint64           `json:"last_seq"`
	}{msgs, sess.Meta.LastSeq}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) exportSession(w http.ResponseWriter, r *http.Request, k *Key) error {
	sess, err := s.owned(r.Context(), k, r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", `attachment; filename="`+sess.Meta.ID+`.jsonl"`)
	if ex, ok := s.cfg.Store.(kernel.SessionExporter); ok {
		return ex.Export(r.Context(), sess.Meta.ID, w)
	}
	return export.Write(r.Context(), w, sess)
}
