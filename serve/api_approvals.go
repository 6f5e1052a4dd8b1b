package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	// RATIONALE.md, "github.com/pmezard/go-difflib".
	"github.com/pmezard/go-difflib/difflib"

	"github.com/agentkernel/agentkernel/kernel"
)

// approvalView is a pending approval as the API (and the page) shows it:
// the whole call, and for the built-in write tools a diff against the
// file as it is now.
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
	Diff      *diffView       `json:"diff,omitempty"`
}

// diffView is a unified diff of what a write_file or edit_file call would
// change, or a note saying why there is none.
type diffView struct {
	Path    string `json:"path"`
	Unified string `json:"unified,omitempty"`
	Note    string `json:"note,omitempty"`
}

func (s *Server) approval(sess *kernel.Session) *approvalView {
	p := sess.Pending
	args := p.Args
	if !json.Valid(args) {
		b, _ := json.Marshal(string(args))
		args = b
	}
	v := &approvalView{ID: p.ID, SessionID: sess.Meta.ID, Session: sess.Meta.Title, CallID: p.Call.ID, Tool: p.Call.Name,
		Args: args, RuleID: p.RuleID, Message: p.Message, Created: p.Created, Expires: p.Expires}
	v.Diff = s.diff(p.Call.Name, p.Args)
	return v
}

// maxDiffFile is the largest current file an approval diff reads.
const maxDiffFile = 1 << 20

// diff computes the change a write_file or edit_file call would make,
// reading the current file through the workspace root: a path that leaves
// it (.., an absolute path, a link pointing out) is not read, nor is a
// file of the kernel's own.
func (s *Server) diff(tool string, raw json.RawMessage) *diffView {
	if tool != "write_file" && tool != "edit_file" {
		return nil
	}
	var a struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
		Old     *string `json:"old"`
		New     *string `json:"new"`
	}
	if err := json.Unmarshal(raw, &a); err != nil || a.Path == "" {
		return &diffView{Path: a.Path, Note: "the arguments name no file"}
	}
	d := &diffView{Path: a.Path}
	if s.cfg.Workspace == "" {
		d.Note = "no workspace: the current file cannot be shown"
		return d
	}
	if full := filepath.Join(s.cfg.Workspace, a.Path); s.protected(full) {
		d.Note = "a file of the kernel's own: not shown (the call will be refused)"
		return d
	}
	old, exists, err := readInRoot(s.cfg.Workspace, a.Path)
	if err != nil {
		d.Note = "the current file cannot be read: " + err.Error()
		return d
	}
	var updated string
	switch tool {
	case "write_file":
		if a.Content == nil {
			d.Note = "the arguments have no content"
			return d
		}
		updated = *a.Content
	case "edit_file":
		if a.Old == nil || a.New == nil {
			d.Note = "the arguments have no old or new text"
			return d
		}
		if !exists {
			d.Note = "the file does not exist (the call will fail)"
			return d
		}
		switch n := strings.Count(old, *a.Old); n {
		case 1:
			updated = strings.Replace(old, *a.Old, *a.New, 1)
		case 0:
			d.Note = "the old text is not in the file (the call will fail)"
			return d
		default:
			d.Note = fmt.Sprintf("the old text occurs %d times (the call will fail)", n)
			return d
		}
	}
	from, lines := "a/"+a.Path, difflib.SplitLines(old)
	if !exists {
		from, lines = "/dev/null", nil
		d.Note = "a new file"
	}
	u, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: lines, B: difflib.SplitLines(updated), FromFile: from, ToFile: "b/" + a.Path, Context: 3,
	})
	if err != nil {
		d.Note = "diff: " + err.Error()
		return d
	}
	if u == "" {
		d.Note = "no change: the file already holds this content"
	}
	d.Unified = u
	return d
}

func (s *Server) protected(path string) bool {
	for _, p := range s.cfg.Protected {
		if path == p || strings.HasPrefix(path, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

// readInRoot reads name inside root with os.Root: no "..", no absolute
// path and no link resolving outside root. A missing file is not an
// error.
func readInRoot(root, name string) (string, bool, error) {
	rt, err := os.OpenRoot(root)
	if err != nil {
		return "", false, err
	}
	defer rt.Close()
	f, err := rt.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", false, err
	}
	if !fi.Mode().IsRegular() {
		return "", false, fmt.Errorf("%s is not a regular file", name)
	}
	if fi.Size() > maxDiffFile {
		return "", false, fmt.Errorf("%s is %d bytes; diffs show files up to %d", name, fi.Size(), maxDiffFile)
	}
	b := make([]byte, fi.Size())
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", false, err
	}
	return string(b[:n]), true, nil
}

type approvalList struct {
	Approvals []*approvalView `json:"approvals"`
}

// approvals lists the pending approvals of k's sessions, oldest first.
func (s *Server) approvals(ctx context.Context, k *Key) (approvalList, error) {
	out := approvalList{Approvals: []*approvalView{}}
	metas, err := s.cfg.Store.List(ctx)
	if err != nil {
		return out, err
	}
	for _, m := range metas {
		if m.Labels[labelOwner] != k.Owner() || m.Status != kernel.StatusAwaitingApproval {
			continue
		}
		sess, err := s.cfg.Store.Load(ctx, m.ID)
		if err != nil || sess.Pending == nil {
			continue // resolved or deleted meanwhile
		}
		out.Approvals = append(out.Approvals, s.approval(sess))
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
		return errorf(codeNotFound, "session %s has no pending approval (it is %s)", sess.Meta.ID, s.status(&sess.Meta))
	}
	writeJSON(w, http.StatusOK, s.approval(sess))
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
	sess, err := s.owned(r.Context(), k, r.PathValue("id"))
	if err != nil {
		return err
	}
	sid := sess.Meta.ID
	if sess.Pending == nil {
		return conflict(s.status(&sess.Meta), "session %s has no pending approval (it is %s)", sid, s.status(&sess.Meta))
	}
	if req.ApprovalID != "" && req.ApprovalID != sess.Pending.ID {
		return conflict(string(kernel.StatusAwaitingApproval), "approval %s is not the pending one (%s): reload it", req.ApprovalID, sess.Pending.ID)
	}
	approve, note, kind := req.Decision == "approve", req.Note, kindApprove
	if !approve {
		kind = kindReject
	}
	rec, err := s.runs.start(sid, k.Owner(), k, kind, func(ctx context.Context, kk *kernel.Kernel) (*kernel.RunResult, error) {
		return kk.Resolve(ctx, sid, approve, note)
	})
	var busy errBusy
	if errors.As(err, &busy) {
		return conflict(runRunning, "session %s has a run in flight (%s): the approval is being decided", sid, busy.run.ID)
	}
	if err != nil {
		return err
	}
	snap, _ := s.runs.get(rec.ID)
	writeJSON(w, http.StatusAccepted, runResponse{Run: &snap})
	return nil
}

// streamApprovals is GET /v1/approvals/stream: Server-Sent Events whose
// every message (event "approvals") is the caller's whole list of pending
// approvals, as GET /v1/approvals answers it: once at once, then whenever
// it may have changed. A client that reconnects gets the current list, so
// it needs no event ids. The approvals page lists them live with it.
func (s *Server) streamApprovals(w http.ResponseWriter, r *http.Request, k *Key) error {
	release, err := s.openStream()
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
		case <-notify:
		case <-tick.C:
			if !send([]byte(": ping\n\n")) {
				return nil
			}
			goto wait
		}
	}
}
