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
	buf.WriteString(": kernel event stream of session " + sid + "\n\n")
	if err := send(); err != nil {
		return nil
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	age := time.NewTimer(s.lim.StreamMaxAge)
	defer age.Stop()
	closing, reason := false, "the server is shutting down: reconnect with Last-Event-ID to resume"
	for {
		evs, ok := t.since(cursor)
		if !ok {
			evs, err = s.events.ReadEvents(r.Context(), sid, cursor, 512)
			if err != nil {
				if r.Context().Err() == nil { // else the client went
					s.logError("session %s: read events: %v", sid, err)
				}
				return nil
			}
		}
		if len(evs) > 0 {
			for _, e := range evs {
				writeEvent(&buf, e)
			}
			cursor = evs[len(evs)-1].Seq
			if err := send(); err != nil {
				return nil // the client went; it resumes from its last id
			}
			continue
		}
		if closing {
			buf.WriteString("event: notice\ndata: ")
			b, _ := kernel.MarshalEvent(kernel.Notice{Source: "serve", Level: "info", Text: reason})
			buf.Write(b)
			buf.WriteString("\n\n")
			_ = send()
			return nil
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-notify:
		case <-s.hub.closing:
			closing = true // send what is stored, then the notice
		case <-age.C:
			closing, reason = true, "this stream reached its age limit: reconnect with Last-Event-ID to resume"
		case <-tick.C:
			buf.WriteString(": ping\n\n")
			if err := send(); err != nil {
				return nil
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
