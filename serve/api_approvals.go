package serve

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/tool"
)

// approvalView is a pending approval as the API (and the page) shows it:
// the whole call, what it would do as its tool previews it, and the
// context it was asked in.
type approvalView struct {
	ID        string          `json:"id"`
	SessionID string          `json:"session_id"`
	Session   string          `json:"session_title"`
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Args      json.RawMessage `json:"args"`
	RuleID    string          `json:"rule_id,omitempty"`
	Message   string          `json:"message,omitempty"`
	Created   time.Time       `json:"created"`
	Expires   time.Time       `json:"expires,omitzero"`
	// Preview is what the call would do, from the tool itself
	// (tool.Previewer); nil for a tool without a preview, and then
	// PreviewError says why when it failed.
	Preview      *tool.Preview `json:"preview,omitempty"`
	PreviewError string        `json:"preview_error,omitempty"`
	Context      *callContext  `json:"context,omitempty"`
	// Agent is the named agent that asks (the innermost agent of an agent
	// call's approval, else the session's); empty for the top-level agent.
	Agent string `json:"agent,omitempty"`
}

// callContext is where in the session the call was made: the prompt of
// the run that made it and the model's words in the message making it,
// each with its sequence number (the page links the transcript there).
type callContext struct {
	Prompt    string `json:"prompt,omitempty"`
	PromptSeq uint64 `json:"prompt_seq,omitempty"`
	Said      string `json:"said,omitempty"`
	Seq       uint64 `json:"seq,omitempty"`
}

// previewTimeout bounds one tool's preview of a pending call.
const previewTimeout = 5 * time.Second

func (s *Server) approval(ctx context.Context, sess *kernel.Session) *approvalView {
	p := sess.Pending
	args := p.Args
	if !json.Valid(args) {
		b, _ := json.Marshal(string(args))
		args = b
	}
	v := &approvalView{ID: p.ID, SessionID: sess.Meta.ID, Session: sess.Meta.Title, CallID: p.Call.ID, Tool: p.Call.Name,
		Args: args, RuleID: p.RuleID, Message: p.Message, Created: p.Created, Expires: p.Expires,
		Context: contextOf(sess.Messages, p.Call.ID), Agent: sess.Meta.Agent}
	if a := p.Asking(); a != nil && a.Agent != "" {
		v.Agent = a.Agent
	}
	if v.Agent == kernel.DefaultAgentName {
		v.Agent = ""
	}
	if t, ok := s.cfg.Kernel.Tools().Lookup(p.Call.Name); ok {
		ctx, cancel := context.WithTimeout(ctx, previewTimeout)
		defer cancel()
		pv, err := tool.PreviewOf(ctx, t, p.Args)
		v.Preview = pv
		if err != nil {
			v.PreviewError = s.cfg.Scrub("the tool could not preview the call: " + err.Error())
		}
	}
	return v
}

// contextOf finds the assistant message making call id and the user
// message before it (the run's prompt, or the steering message the
// model was answering).
func contextOf(msgs []kernel.Message, id string) *callContext {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := &msgs[i]
		if m.Role != kernel.RoleAssistant || !slices.ContainsFunc(m.ToolCalls, func(c kernel.ToolCall) bool { return c.ID == id }) {
			continue
		}
		c := &callContext{Said: m.Content, Seq: m.Seq}
		for j := i - 1; j >= 0; j-- {
			if msgs[j].Role == kernel.RoleUser {
				c.Prompt, c.PromptSeq = msgs[j].Content, msgs[j].Seq
				break
			}
		}
		return c
	}
	return nil
}

type approvalList struct {
	Approvals []*approvalView `json:"approvals"`
}

// approvals lists the pending approvals of k's sessions, oldest first;
// for a key restricted to agents, only those of its agents' sessions
// (the ones it may decide).
func (s *Server) approvals(ctx context.Context, k *Key) (approvalList, error) {
	out := approvalList{Approvals: []*approvalView{}}
	metas, err := s.cfg.Store.List(ctx)
	if err != nil {
		return out, err
	}
	for _, m := range metas {
		if m.Labels[labelOwner] != k.Owner() || m.Status != kernel.StatusAwaitingApproval || !agentAllowed(k, m.Agent) {
			continue
		}
		sess, err := s.cfg.Store.Load(ctx, m.ID)
		if err != nil || sess.Pending == nil {
			continue // resolved or deleted meanwhile
		}
		out.Approvals = append(out.Approvals, s.approval(ctx, sess))
	}
	slices.SortFunc(out.Approvals, func(a, b *approvalView) int { return a.Created.Compare(b.Created) })
	return out, nil
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, k *Key) error {
	out, err := s.approvals(r.Context(), k)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getApproval(w http.ResponseWriter, r *http.Request, k *Key) error {
	sess, err := s.owned(r.Context(), k, r.PathValue("id"))
	if err != nil {
		return err
	}
	if sess.Pending == nil {
		return errorf(codeNotFound, "session %s has no pending approval (it is %s)", sess.Meta.ID, s.status(r.Context(), &sess.Meta))
	}
	writeJSON(w, http.StatusOK, s.approval(r.Context(), sess))
	return nil
}

type decideReq struct {
	Decision string `json:"decision"`
	Note     string `json:"note"`
	// ApprovalID, when set, must be the pending approval's id: a decision
	// made on a page showing an older approval is refused.
	ApprovalID string `json:"approval_id"`
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request, k *Key) error {
	var req decideReq
	if err := s.decodeBody(r, &req); err != nil {
		return err
	}
	if req.Decision != "approve" && req.Decision != "reject" {
		return badField("decision", "decision %q: want approve or reject", req.Decision)
	}
	if len(req.Note) > 4096 {
		return badField("note", "note is %d bytes; at most 4096", len(req.Note))
	}
	sess, err := s.ownedToAct(r.Context(), k, r.PathValue("id"))
	if err != nil {
		return err
	}
	sid := sess.Meta.ID
	if sess.Pending == nil {
		return conflict(s.status(r.Context(), &sess.Meta), "session %s has no pending approval (it is %s)", sid, s.status(r.Context(), &sess.Meta))
	}
	if req.ApprovalID != "" && req.ApprovalID != sess.Pending.ID {
		return conflict(string(kernel.StatusAwaitingApproval), "approval %s is not the pending one (%s): reload it", req.ApprovalID, sess.Pending.ID)
	}
	approve, note, kind := req.Decision == "approve", req.Note, kindApprove
	if !approve {
		kind = kindReject
	}
	st, err := s.openRunStream(r, k, sid) // the continued run's events in this response, if asked
	if err != nil {
		return err
	}
	if st != nil {
		defer st.close()
	}
	rec, err := s.runs.start(r.Context(), sid, k.Owner(), k, kind, func(ctx context.Context, kk *kernel.Kernel) (*kernel.RunResult, error) {
		return kk.Resolve(ctx, sid, approve, note)
	})
	var busy errBusy
	if errors.As(err, &busy) {
		return conflict(runRunning, "session %s has a run in flight (%s): the approval is being decided", sid, busy.run.ID)
	}
	if err != nil {
		return err
	}
	s.answerRun(w, r, st, rec)
	return nil
}

// streamApprovals is GET /v1/approvals/stream: Server-Sent Events whose
// every message (event "approvals") is the caller's whole list of pending
// approvals, as GET /v1/approvals answers it: once at once, then whenever
// it may have changed. A client that reconnects gets the current list, so
// it needs no event ids. The approvals page lists them live with it. It
// ends when the client goes, the server drains, the key is revoked, or
// it reaches Limits.StreamMaxAge (after a notice event).
func (s *Server) streamApprovals(w http.ResponseWriter, r *http.Request, k *Key) error {
	release, err := s.openStream(k)
	if err != nil {
		return err
	}
	defer release()
	notify, stop := s.hub.watchInbox(k.Owner())
	defer stop()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	age := time.NewTimer(s.lim.StreamMaxAge)
	defer age.Stop()
	send := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(s.lim.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for {
		list, err := s.approvals(r.Context(), k)
		if err != nil {
			s.logError("approvals stream: %v", err)
			return nil
		}
		b, _ := json.Marshal(list)
		if !send(append(append([]byte("event: approvals\ndata: "), b...), "\n\n"...)) {
			return nil
		}
	wait:
		select {
		case <-r.Context().Done():
			return nil
		case <-s.hub.closing:
			return nil
		case <-age.C:
			// A client reconnects and gets the whole list again.
			send([]byte("event: notice\ndata: {\"text\":\"this stream reached its age limit: reconnect\"}\n\n"))
			return nil
		case <-notify:
		case <-tick.C:
			if !send([]byte(": ping\n\n")) {
				return nil
			}
			goto wait
		}
	}
}
