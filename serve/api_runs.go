package serve

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/queue"
)

// What a new prompt does when the session has a run in flight.
const (
	busyReject = "reject" // 409 with the run (default)
	busyQueue  = "queue"  // queued as a follow-up: runs when the run ends
	busySteer  = "steer"  // delivered into the run at its next step boundary
)

type startRunReq struct {
	Prompt string `json:"prompt"`
	IfBusy string `json:"if_busy"`
}

// runResponse is what starting a run answers: the run, or the queued
// message when the session was busy and the request said queue or steer.
type runResponse struct {
	Run    *runRec     `json:"run,omitempty"`
	Queued *queuedView `json:"queued,omitempty"`
}

type queuedView struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Run is the run in flight the message waits for.
	Run string `json:"run,omitempty"`
}

func (s *Server) startRun(w http.ResponseWriter, r *http.Request, k *Key) error {
	var req startRunReq
	if err := s.decodeBody(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Prompt) == "" {
		return badField("prompt", "prompt is required and must not be blank")
	}
	switch req.IfBusy {
	case "":
		req.IfBusy = busyReject
	case busyReject, busyQueue, busySteer:
	default:
		return badField("if_busy", "if_busy %q: want reject, queue or steer", req.IfBusy)
	}
	sess, err := s.ownedToActHead(r.Context(), k, r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := s.runnable(r.Context(), sess); err != nil {
		return err
	}
	sid := sess.Meta.ID
	prompt := req.Prompt
	st, err := s.openRunStream(r, k, sid) // the run's events in this response, if asked
	if err != nil {
		return err
	}
	if st != nil {
		defer st.close()
	}
	rec, err := s.runs.start(r.Context(), sid, k.Owner(), k, kindPrompt, func(ctx context.Context, kk *kernel.Kernel) (*kernel.RunResult, error) {
		return kk.Run(ctx, sid, prompt)
	})
	var busy errBusy
	if errors.As(err, &busy) {
		if req.IfBusy == busyReject {
			e := conflict(runRunning, "session %s has a run in flight (%s); send if_busy: queue or steer to add the prompt to it", sid, busy.run.ID)
			return e
		}
		kind := queue.FollowUp
		if req.IfBusy == busySteer {
			kind = queue.Steer
		}
		e, err := s.cfg.Queue.Add(r.Context(), sid, prompt, kind)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusAccepted, runResponse{Queued: &queuedView{ID: e.ID, Kind: kind, Run: busy.run.ID}})
		return nil
	}
	if err != nil {
		return err
	}
	s.answerRun(w, r, st, rec)
	return nil
}

// runnable refuses a new prompt where the kernel would: a pending
// approval, or an interrupted run that must be resumed first.
func (s *Server) runnable(ctx context.Context, sess *kernel.Session) error {
	if sess.Pending != nil {
		return conflict(string(kernel.StatusAwaitingApproval), "session %s waits for an approval of %s: approve or reject it first", sess.Meta.ID, sess.Pending.Call.Name)
	}
	if s.status(ctx, &sess.Meta) == statusInterrupted {
		return conflict(statusInterrupted, "session %s has an interrupted run: resume it first (POST /v1/sessions/%s/resume)", sess.Meta.ID, sess.Meta.ID)
	}
	return nil
}

func (s *Server) resumeRun(w http.ResponseWriter, r *http.Request, k *Key) error {
	sess, err := s.ownedToActHead(r.Context(), k, r.PathValue("id"))
	if err != nil {
		return err
	}
	sid := sess.Meta.ID
	if st := s.status(r.Context(), &sess.Meta); st != statusInterrupted {
		return conflict(st, "session %s has no interrupted run (it is %s)", sid, st)
	}
	stream, err := s.openRunStream(r, k, sid)
	if err != nil {
		return err
	}
	if stream != nil {
		defer stream.close()
	}
	rec, err := s.runs.start(r.Context(), sid, k.Owner(), k, kindResume, func(ctx context.Context, kk *kernel.Kernel) (*kernel.RunResult, error) {
		return kk.Continue(ctx, sid)
	})
	var busy errBusy
	if errors.As(err, &busy) {
		return conflict(runRunning, "session %s has a run in flight (%s)", sid, busy.run.ID)
	}
	if err != nil {
		return err
	}
	s.answerRun(w, r, stream, rec)
	return nil
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, k *Key) error {
	sess, err := s.owned(r.Context(), k, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string][]runRec{"runs": s.runs.list(r.Context(), sess.Meta.ID)})
	return nil
}

// ownedRun finds run rid of session sid for k.
func (s *Server) ownedRun(r *http.Request, k *Key) (runRec, error) {
	return s.ownedRunOf(r, k, s.owned)
}

// ownedRunOf is ownedRun finding the session with find (owned, or
// ownedToAct for a request that acts on the run).
func (s *Server) ownedRunOf(r *http.Request, k *Key, find func(context.Context, *Key, string) (*kernel.Session, error)) (runRec, error) {
	sess, err := find(r.Context(), k, r.PathValue("id"))
	if err != nil {
		return runRec{}, err
	}
	rid := r.PathValue("run")
	run, ok := s.runs.get(r.Context(), rid)
	if !ok || run.SessionID != sess.Meta.ID {
		return runRec{}, notFound("run", rid)
	}
	return run, nil
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request, k *Key) error {
	run, err := s.ownedRun(r, k)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, run)
	return nil
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request, k *Key) error {
	run, err := s.ownedRunOf(r, k, s.ownedToAct)
	if err != nil {
		return err
	}
	got, err := s.runs.cancelRun(r.Context(), run.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, got)
	return nil
}

type messageReq struct {
	Text string `json:"text"`
	Kind string `json:"kind"`
}

// postMessage queues a steering message for the run in flight, or a
// follow-up (which starts a run at once when none is in flight).
func (s *Server) postMessage(w http.ResponseWriter, r *http.Request, k *Key) error {
	var req messageReq
	if err := s.decodeBody(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Text) == "" {
		return badField("text", "text is required and must not be blank")
	}
	switch req.Kind {
	case "":
		req.Kind = queue.Steer
	case queue.Steer, queue.FollowUp:
	default:
		return badField("kind", "kind %q: want steer or followup", req.Kind)
	}
	sess, err := s.ownedToActHead(r.Context(), k, r.PathValue("id"))
	if err != nil {
		return err
	}
	sid := sess.Meta.ID
	run, running := s.runs.activeRun(r.Context(), sid)
	if !running {
		if req.Kind == queue.Steer {
			return conflict(s.status(r.Context(), &sess.Meta), "session %s has no run in flight to steer: start a run, or send kind followup", sid)
		}
		if err := s.runnable(r.Context(), sess); err != nil {
			return err
		}
		st, err := s.openRunStream(r, k, sid) // the run's events in this response, if asked
		if err != nil {
			return err
		}
		if st != nil {
			defer st.close()
		}
		text := req.Text
		rec, err := s.runs.start(r.Context(), sid, k.Owner(), k, kindFollowUp, func(ctx context.Context, kk *kernel.Kernel) (*kernel.RunResult, error) {
			return kk.Run(ctx, sid, text)
		})
		var busy errBusy
		if errors.As(err, &busy) {
			run, running = busy.run, true
		} else if err != nil {
			return err
		} else {
			s.answerRun(w, r, st, rec)
			return nil
		}
	}
	e, err := s.cfg.Queue.Add(r.Context(), sid, req.Text, req.Kind)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, runResponse{Queued: &queuedView{ID: e.ID, Kind: req.Kind, Run: run.ID}})
	return nil
}

func encodeCursor(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
