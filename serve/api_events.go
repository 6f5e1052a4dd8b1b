package serve

import (
	"bytes"
	"net/http"
	"strconv"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// heartbeat is how often an idle stream sends a comment, so proxies keep
// it open and a vanished client is noticed.
const heartbeat = 15 * time.Second

// streamEvents is GET /v1/sessions/{id}/events: the session's events as
// Server-Sent Events, each with its stored id, from after Last-Event-ID
// (or ?after=N; 0 replays everything), then live until the client goes,
// the server drains or the stream reaches Limits.StreamMaxAge (a final
// notice event without an id says so), or its key is revoked.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, k *Key) error {
	sess, err := s.ownedHead(r.Context(), k, r.PathValue("id"))
	if err != nil {
		return err
	}
	cursor, err := lastEventID(r)
	if err != nil {
		return err
	}
	release, err := s.openStream(k)
	if err != nil {
		return err
	}
	defer release()
	sid := sess.Meta.ID
	t := s.hub.acquire(sid)
	defer s.hub.release(t)
	notify := t.subscribe() // before the first read: no wake-up is missed
	defer t.unsubscribe(notify)

	s.pumpEvents(w, r, t, notify, cursor, ": kernel event stream of session "+sid+"\n\n", nil)
	return nil
}

// pumpEvents answers 200 with t's stored events after cursor as
// Server-Sent Events, first hello (a comment), then live until the client
// goes, the server drains or the stream reaches Limits.StreamMaxAge (a
// final notice event without an id says so), or its key is revoked. With
// run (a run of t's session this server started, its stream subscribed as
// notify before the run began), cursor is ignored: the stream starts
// before the run's first event and ends after its last, the first
// run.completed or run.failed (or, for a run that stored neither, once it
// has ended and what it stored is sent). The caller holds a stream slot.
func (s *Server) pumpEvents(w http.ResponseWriter, r *http.Request, t *topic, notify chan struct{}, cursor uint64, hello string, run *runWatch) {
	sid := t.id
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	var buf bytes.Buffer
	send := func() error {
		_ = rc.SetWriteDeadline(time.Now().Add(s.lim.WriteTimeout))
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		buf.Reset()
		return rc.Flush()
	}
	buf.WriteString(hello)
	if err := send(); err != nil {
		return
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	age := time.NewTimer(s.lim.StreamMaxAge)
	defer age.Stop()
	closing, reason := false, "the server is shutting down: reconnect with Last-Event-ID to resume"
	begun := run == nil // the stream knows where it starts
	for {
		if !begun {
			ended := run.ended() // first: a run that ended has its first event set, if it stored one
			if f := run.span.first.Load(); f != 0 {
				cursor, begun = f-1, true
			} else if ended {
				return // the run stored no event
			}
		}
		if begun {
			endedBefore := run != nil && run.ended()
			evs, ok := t.since(cursor)
			if !ok {
				var err error
				evs, err = s.events.ReadEvents(r.Context(), sid, cursor, 512)
				if err != nil {
					if r.Context().Err() == nil { // else the client went
						s.logError("session %s: read events: %v", sid, err)
					}
					return
				}
			}
			last := false
			if run != nil {
				evs, last = run.own(evs, endedBefore)
			}
			if len(evs) > 0 {
				for _, e := range evs {
					writeEvent(&buf, e)
				}
				cursor = evs[len(evs)-1].Seq
				if err := send(); err != nil {
					return // the client went; it resumes from its last id
				}
			}
			if last {
				return
			}
			if len(evs) > 0 || (run != nil && run.over) {
				continue
			}
		}
		if closing {
			buf.WriteString("event: notice\ndata: ")
			b, _ := kernel.MarshalEvent(kernel.Notice{Source: "serve", Level: "info", Text: reason})
			buf.Write(b)
			buf.WriteString("\n\n")
			_ = send()
			return
		}
		var ended <-chan struct{} // nil: no case
		if run != nil && !run.over {
			ended = run.done
		}
		select {
		case <-r.Context().Done():
			return
		case <-notify:
		case <-ended: // what it stored is read next
		case <-s.hub.closing:
			closing = true // send what is stored, then the notice
		case <-age.C:
			closing, reason = true, "this stream reached its age limit: reconnect with Last-Event-ID to resume"
		case <-tick.C:
			buf.WriteString(": ping\n\n")
			if err := send(); err != nil {
				return
			}
		}
	}
}

// writeEvent renders one stored event as an SSE message.
func writeEvent(buf *bytes.Buffer, e kernel.StoredEvent) {
	buf.WriteString("id: ")
	buf.WriteString(strconv.FormatUint(e.Seq, 10))
	buf.WriteString("\nevent: ")
	buf.WriteString(e.Type)
	buf.WriteString("\ndata: ")
	buf.Write(e.Data) // one line: MarshalEvent escapes newlines
	buf.WriteString("\n\n")
}

// lastEventID is where a stream resumes: the Last-Event-ID header, else
// the after query parameter, else 0 (everything).
func lastEventID(r *http.Request) (uint64, error) {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, badField("Last-Event-ID", "Last-Event-ID %q: want an event id this server sent (a number)", v)
		}
		return n, nil
	}
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, badField("after", "after %q: want an event id (a number)", v)
		}
		return n, nil
	}
	return 0, nil
}
