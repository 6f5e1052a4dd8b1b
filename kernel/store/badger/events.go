package badger

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/internal/rules"
)

// The event log (kernel.EventLog). A session's events are kept beside its
// messages, under its prefix, so every whole-session operation (Delete,
// GC of orphans, the TTL sweep) covers them:
//
//	s/<id>/e/<seq, 8-byte big-endian>   one event
//
// Their value is sealed JSON (eventVersion) of the event's type, time and
// data. Events are not part of an export: they are a record of a run's
// progress for the clients watching it, not of the conversation.
const (
	eventInfix   = "/e/"
	eventVersion = 1
	// maxReadEvents caps one ReadEvents.
	maxReadEvents = 4096
)

func eventPrefix(id string) []byte { return []byte(keyPrefix + id + eventInfix) }

func eventKey(id string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(eventPrefix(id), seq)
}

// eventLast remembers each session's last event Seq once read, so an
// append does not seek for it. Appends to one session are serialised by
// its stripe of locks.
type eventLast struct {
	mu    sync.Mutex
	last  map[string]uint64
	locks locks
}

func (e *eventLast) get(id string) (uint64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.last[id]
	return v, ok
}

func (e *eventLast) set(id string, v uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.last == nil {
		e.last = map[string]uint64{}
	}
	e.last[id] = v
}

func (e *eventLast) forget(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.last, id)
}

type storedEvent struct {
	Type string          `json:"type"`
	Time time.Time       `json:"time,omitzero"`
	Data json.RawMessage `json:"data"`
}

// AppendEvents stores events at the end of session id's log in one synced
// transaction (kernel.EventLog). The fence is ignored: one process owns
// the store (Options: an exclusive lock on its directory).
func (s *Store) AppendEvents(ctx context.Context, id string, _ uint64, events []kernel.StoredEvent) (uint64, error) {
	if err := rules.CheckID(id); err != nil {
		return 0, fmt.Errorf("append events: %w: %w", err, kernel.ErrSessionNotFound)
	}
	if s.opts.ReadOnly {
		return 0, fmt.Errorf("append events to session %s: %w", id, ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("append events to session %s: %w", id, err)
	}
	vals, size, err := encodeEvents(events)
	if err != nil {
		return 0, fmt.Errorf("append events to session %s: %w", id, err)
	}
	if err := s.checkSpace(int64(size), false); err != nil {
		return 0, fmt.Errorf("append events to session %s: %w", id, err)
	}
	mu := s.events.locks.of(id)
	mu.Lock()
	defer mu.Unlock()
	// The session must exist; a Delete racing with this append leaves
	// events without metadata, which GC removes as an orphan's.
	last, err := s.lastEvent(id, true)
	if err != nil {
		return 0, fmt.Errorf("append events: %w", err)
	}
	first := last + 1
	if size <= groupStepMax && len(vals) <= groupStepMsgs {
		j := &job{id: id, vals: vals, keys: make([][]byte, len(vals)), size: size}
		for i := range vals {
			j.keys[i] = eventKey(id, first+uint64(i))
		}
		if err := s.commitGrouped(j); err != nil {
			s.events.forget(id)
			return 0, fmt.Errorf("append events to session %s: %w", id, err)
		}
		s.events.set(id, last+uint64(len(vals)))
		return first, nil
	}
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	for i, v := range vals {
		err = txn.Set(eventKey(id, first+uint64(i)), v)
		if errors.Is(err, bdg.ErrTxnTooBig) {
			if err = txn.Commit(); err == nil {
				txn = s.db.NewTransaction(true)
				err = txn.Set(eventKey(id, first+uint64(i)), v)
			}
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		err = txn.Commit()
	}
	if err != nil {
		s.events.forget(id) // a part may have landed: read the last again
		return 0, fmt.Errorf("append events to session %s: %w", id, err)
	}
	s.events.set(id, last+uint64(len(vals)))
	return first, nil
}

// encodeEvents encodes events as stored, and returns their total size.
func encodeEvents(events []kernel.StoredEvent) ([][]byte, int, error) {
	size := 0
	vals := make([][]byte, len(events))
	for i, e := range events {
		v, err := encodeJSON(eventVersion, storedEvent{Type: e.Type, Time: e.Time, Data: e.Data})
		if err != nil {
			return nil, 0, err
		}
		vals[i] = v
		size += len(v)
	}
	return vals, size, nil
}

// lastEvent returns the Seq of session id's last stored event (0 when
// it has none). With exists, the session's metadata must be stored
// (else ErrSessionNotFound). The caller holds the session's event lock.
func (s *Store) lastEvent(id string, exists bool) (uint64, error) {
	last, known := s.events.get(id)
	if known && !exists {
		return last, nil
	}
	err := s.db.View(func(txn *bdg.Txn) error {
		if exists {
			if _, err := txn.Get(metaKey(id)); errors.Is(err, bdg.ErrKeyNotFound) {
				return fmt.Errorf("session %q: %w", id, kernel.ErrSessionNotFound)
			} else if err != nil {
				return err
			}
		}
		if known {
			return nil
		}
		it := txn.NewIterator(bdg.IteratorOptions{Prefix: eventPrefix(id), Reverse: true})
		defer it.Close()
		it.Seek(eventKey(id, ^uint64(0)))
		if it.Valid() {
			k := it.Item().Key()
			last = binary.BigEndian.Uint64(k[len(k)-8:])
		}
		return nil
	})
	if err != nil {
		s.events.forget(id)
		return 0, err
	}
	return last, nil
}

// ReadEvents returns up to limit events of session id after the given Seq
// (kernel.EventLog), at most 4096.
func (s *Store) ReadEvents(ctx context.Context, id string, after uint64, limit int) ([]kernel.StoredEvent, error) {
	if rules.CheckID(id) != nil {
		return nil, nil
	}
	if s.remote != nil {
		return nil, fmt.Errorf("read events of session %s: a read-only store that another process holds does not serve events", id)
	}
	if limit <= 0 || limit > maxReadEvents {
		limit = maxReadEvents
	}
	var out []kernel.StoredEvent
	err := s.db.View(func(txn *bdg.Txn) error {
		p := eventPrefix(id)
		it := txn.NewIterator(bdg.IteratorOptions{Prefix: p, PrefetchValues: true, PrefetchSize: min(limit, 100)})
		defer it.Close()
		for it.Seek(eventKey(id, after+1)); it.Valid() && len(out) < limit; it.Next() {
			if len(out)%256 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			k := it.Item().Key()
			seq, ok := parseMsgSeq(k, p)
			if !ok {
				continue
			}
			var se storedEvent
			err := it.Item().Value(func(v []byte) error { return decodeJSON(v, eventVersion, &se) })
			if err != nil {
				return &kernel.CorruptError{Session: id, Part: fmt.Sprintf("event %d", seq), Err: err}
			}
			out = append(out, kernel.StoredEvent{Seq: seq, Type: se.Type, Time: se.Time, Data: se.Data})
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("read events: %w", err)
	}
	return out, nil
}

// deleteEvents deletes every event of id. The caller holds the session's
// lock.
func (s *Store) deleteEvents(ctx context.Context, id string) error {
	mu := s.events.locks.of(id)
	mu.Lock()
	defer mu.Unlock()
	s.events.forget(id)
	return s.deletePrefix(ctx, eventPrefix(id), eventKey(id, 0))
}

var (
	_ kernel.EventLog           = (*Store)(nil)
	_ kernel.StepEventCommitter = (*Store)(nil)
)
