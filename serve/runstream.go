package serve

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/agentkernel/agentkernel/kernel"
)

// A run that streams its own events: POST /v1/sessions/{id}/runs with
// Accept: text/event-stream answers, once the run is started (its claim
// durable: when the 202 would go out), 200 with the run's events as
// Server-Sent Events — the framing and ids of GET …/events, so a client
// whose connection drops resumes there with Last-Event-ID — and ends after
// the run's run.completed or run.failed. The run does not depend on the
// response: it goes on when the client goes. Why: RATIONALE.md, "A run
// through kernel serve, fifth round (issue 45)".

// eventSpan is where a run's events are in its session's event log: the
// seq of its first and of its last stored event (0 until one is). While a
// run holds its session (this server's slot, and the lease on a shared
// store) the events the session's topic publishes are the run's: the
// previous run's were stored before it let the session go.
type eventSpan struct {
	first atomic.Uint64
	last  atomic.Uint64
}

// follow makes the events t publishes from now on sp's.
func (t *topic) follow(sp *eventSpan) {
	t.mu.Lock()
	t.runner = sp
	t.mu.Unlock()
}

// unfollow ends follow(sp), unless a later run of the session began.
func (t *topic) unfollow(sp *eventSpan) {
	t.mu.Lock()
	if t.runner == sp {
		t.runner = nil
	}
	t.mu.Unlock()
}

// wantsStream reports whether r asks for an event stream: Accept lists
// text/event-stream at a weight above that of application/json (a client
// that accepts both equally, as MCP clients do, keeps the 202 JSON).
func wantsStream(r *http.Request) bool {
	sse, js := 0.0, 0.0
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			q := 1.0
			if v, ok := params["q"]; ok {
				if q, err = strconv.ParseFloat(v, 64); err != nil {
					continue
				}
			}
			switch mt {
			case "text/event-stream":
				sse = max(sse, q)
			case "application/json":
				js = max(js, q)
			}
		}
	}
	return sse > js
}

// runWatch is what the stream of a run follows: the run's end and the
// span of its events.
type runWatch struct {
	done <-chan struct{} // closed once the run ended and its events are stored
	span *eventSpan
	over bool // done was seen closed
}

// ended reports whether the run has ended (then span is final).
func (w *runWatch) ended() bool {
	if !w.over {
		select {
		case <-w.done:
			w.over = true
		default:
		}
	}
	return w.over
}

// own cuts evs (stored events, in order, after what the stream sent) to
// the run's: up to its first run.completed or run.failed, or, once the run
// has ended, up to its last stored event (what follows is a follow-up's).
// last reports that the stream has then sent everything of the run;
// endedBefore, that the run had ended before evs were read (so an empty
// read means nothing is left).
func (w *runWatch) own(evs []kernel.StoredEvent, endedBefore bool) (_ []kernel.StoredEvent, last bool) {
	for i, e := range evs {
		if e.Type == runCompletedType || e.Type == runFailedType {
			return evs[:i+1], true
		}
	}
	if !w.ended() { // after the read: what it returned is the run's
		return evs, false
	}
	end := w.span.last.Load()
	n := 0
	for n < len(evs) && evs[n].Seq <= end {
		n++
	}
	if n == 0 {
		return nil, endedBefore
	}
	return evs[:n], evs[n-1].Seq >= end
}

// runStream is the stream a request that starts a run asked for, open
// (its slot taken, its topic subscribed) before the run starts.
type runStream struct {
	t      *topic
	notify chan struct{}
	close  func()
}

// openRunStream opens the stream r asks for (Accept: text/event-stream)
// for the run k is about to start on session sid: nil when r asks none.
// It takes a stream slot of k's (429 over the limits) and subscribes to
// the session's topic before the run starts, so no event of it is
// missed. The caller calls close when the response ends (or the run
// was not started).
func (s *Server) openRunStream(r *http.Request, k *Key, sid string) (*runStream, error) {
	if !wantsStream(r) {
		return nil, nil
	}
	if !k.Has(ScopeRead) {
		return nil, errorf(codeForbidden, "key %q lacks the read scope a run's event stream needs (without Accept: text/event-stream the run answers 202)", k.Name)
	}
	release, err := s.openStream(k)
	if err != nil {
		return nil, err
	}
	t := s.hub.acquire(sid)
	notify := t.subscribe()
	return &runStream{t: t, notify: notify, close: func() {
		t.unsubscribe(notify)
		s.hub.release(t)
		release()
	}}, nil
}

// answerRun answers a request that started rec: 202 with the run, or,
// when it asked for the run's events (st), 200 with them (pumpEvents).
func (s *Server) answerRun(w http.ResponseWriter, r *http.Request, st *runStream, rec runRec) {
	if st == nil {
		writeJSON(w, http.StatusAccepted, runResponse{Run: &rec})
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+rec.SessionID+"/runs/"+rec.ID)
	s.pumpEvents(w, r, st.t, st.notify, 0, ": kernel run "+rec.ID+" of session "+rec.SessionID+"\n\n", &runWatch{done: rec.done, span: rec.span})
}
