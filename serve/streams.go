package serve

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Event streams are held open for as long as a client wants, so they are
// what one client could take from all the others: one key's streams are
// capped (Limits.MaxStreamsPerKey), the last Limits.StreamReserve of the
// server's streams are kept for keys that may approve (the approvals inbox
// stays reachable whatever readers hold), a stream ends after
// Limits.StreamMaxAge with a notice to reconnect (a client that stopped
// reading but whose socket lives frees its slot), and a connection whose
// peer stopped acknowledging is dropped by the operating system after
// Limits.PeerTimeout (streams send a heartbeat, so there is always data
// to acknowledge). Why: RATIONALE.md, "Streams: per key, a reserve for
// approvers, and an age".
type streamSlots struct {
	mu     sync.Mutex
	total  int
	perKey map[string]int
}

// openStream counts an event stream of k against the limits: 429 over
// them. The caller calls release when the stream ends.
func (s *Server) openStream(k *Key) (release func(), err error) {
	sl := &s.slots
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if n := sl.perKey[k.ID]; n >= s.lim.MaxStreamsPerKey {
		e := errorf(http.StatusTooManyRequests, "too_many_streams", "key %q holds %d event streams, its limit (end one, or raise kernel serve --max-streams-per-key)", k.Name, n)
		e.retryAfter = 5
		return nil, e
	}
	limit := s.lim.MaxStreams
	if !k.Has(ScopeApprove) {
		limit -= s.lim.StreamReserve
	}
	if sl.total >= limit {
		e := errorf(http.StatusTooManyRequests, "too_many_streams", "the server holds %d event streams, its limit for this key", sl.total)
		e.retryAfter = 5
		return nil, e
	}
	sl.total++
	sl.perKey[k.ID]++
	return func() {
		sl.mu.Lock()
		defer sl.mu.Unlock()
		sl.total--
		if sl.perKey[k.ID]--; sl.perKey[k.ID] == 0 {
			delete(sl.perKey, k.ID)
		}
	}, nil
}

// streamCount is the number of open streams.
func (s *Server) streamCount() int {
	s.slots.mu.Lock()
	defer s.slots.mu.Unlock()
	return s.slots.total
}

// Revocation: every authenticated request runs under a context the
// server can cancel by key. A watcher rereads the key file every
// keyCheck (KeyStore.reload skips an unchanged file by its stamp) and
// cancels the requests of every key that is no longer active — its event
// streams end, its ongoing requests stop — so a revoked key keeps nothing
// open for longer than that, on every replica that reads the file.

// keyCheck is how often the key file is looked at for revocations: the
// second docs/serve.md promises.
const keyCheck = time.Second

type keyRequests struct {
	mu   sync.Mutex
	next uint64
	live map[string]map[uint64]context.CancelFunc // by key id
}

// track runs a request of key id under a context revoke can cancel; done
// forgets it.
func (kr *keyRequests) track(ctx context.Context, id string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	kr.mu.Lock()
	defer kr.mu.Unlock()
	if kr.live == nil {
		kr.live = map[string]map[uint64]context.CancelFunc{}
	}
	if kr.live[id] == nil {
		kr.live[id] = map[uint64]context.CancelFunc{}
	}
	kr.next++
	n := kr.next
	kr.live[id][n] = cancel
	return ctx, func() {
		cancel()
		kr.mu.Lock()
		defer kr.mu.Unlock()
		delete(kr.live[id], n)
		if len(kr.live[id]) == 0 {
			delete(kr.live, id)
		}
	}
}

// sweep cancels the requests of every key active does not vouch for, and
// returns how many it cancelled.
func (kr *keyRequests) sweep(active func(id string) bool) int {
	kr.mu.Lock()
	var ids []string
	for id := range kr.live {
		ids = append(ids, id)
	}
	kr.mu.Unlock()
	n := 0
	for _, id := range ids {
		if active(id) {
			continue
		}
		kr.mu.Lock()
		for _, cancel := range kr.live[id] {
			cancel()
			n++
		}
		kr.mu.Unlock()
	}
	return n
}

// watchKeys cancels the requests of revoked keys until ctx ends. Its owner
// is the Server: Start starts it, halt waits for it.
func (s *Server) watchKeys(ctx context.Context) {
	tick := time.NewTicker(keyCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := s.cfg.Keys.reload(true); err != nil {
			// A broken rewrite keeps the keys last read (and their
			// revocations); the next good one is picked up.
			continue
		}
		if n := s.keyReqs.sweep(s.cfg.Keys.active); n > 0 {
			s.logError("closed %d requests and streams of revoked keys", n)
		}
	}
}
