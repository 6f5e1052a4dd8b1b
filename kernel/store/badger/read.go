package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"time"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/internal/rules"
)

// Load returns the session id: its metadata, its messages 1..LastSeq and
// its pending approval. A damaged value fails with a *kernel.CorruptError naming
// the session and the message's sequence number.
func (s *Store) Load(ctx context.Context, id string) (*kernel.Session, error) {
	if err := rules.CheckID(id); err != nil {
		return nil, fmt.Errorf("load session: %w: %w", err, kernel.ErrSessionNotFound)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.remote != nil {
		return s.remoteLoad(ctx, id)
	}
	var out *kernel.Session
	var damaged map[uint64]string
	err := s.db.View(func(txn *bdg.Txn) error {
		meta, err := s.liveMeta(txn, id)
		if err != nil {
			return err
		}
		msgs, lost, err := readMessages(ctx, txn, id, meta.LastSeq)
		if err != nil {
			return err
		}
		if lost != nil {
			meta.Labels = maps.Clone(meta.Labels)
			if meta.Labels == nil {
				meta.Labels = map[string]string{}
			}
			meta.Labels[LabelDamaged] = damageLabel(lost)
			damaged = lost
		}
		out = &kernel.Session{Meta: meta, Messages: msgs}
		out.Pending, err = readPending(txn, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("load session: %w", err)
	}
	// Any reader records what it found, a read-only one too (the record is
	// a file beside Badger's, not part of the store it reads), so `sessions
	// ls` flags the session from then on. A reader that may not write the
	// store's directory (another user's store) leaves it to the next
	// writer.
	if damaged != nil {
		if err := updateDamage(s.dir, func(d damageRecord) {
			if d[id] == nil {
				d[id] = map[uint64]string{}
			}
			for seq, what := range damaged {
				if _, known := d[id][seq]; !known {
					d[id][seq] = what
				}
			}
		}); errors.Is(err, fs.ErrPermission) && s.opts.ReadOnly {
			s.opts.Logger.Debug("cannot record damaged messages", "session", id, "error", err)
		} else if err != nil {
			s.opts.Logger.Warn("cannot record damaged messages", "session", id, "error", err)
		}
	}
	return out, nil
}

// LoadHead is Load without the messages (kernel.SessionHeadLoader): the
// metadata (its expiry checked as Load does) and the pending approval, in
// one read transaction that reads no message. The metadata has no
// LabelDamaged (the messages, where damage is found, are not read).
// Why: RATIONALE.md, "A run through kernel serve, second round (issue 45)".
func (s *Store) LoadHead(ctx context.Context, id string) (*kernel.Session, error) {
	if s.remote != nil {
		return s.Load(ctx, id)
	}
	if err := rules.CheckID(id); err != nil {
		return nil, fmt.Errorf("load session: %w: %w", err, kernel.ErrSessionNotFound)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *kernel.Session
	err := s.db.View(func(txn *bdg.Txn) error {
		meta, err := s.liveMeta(txn, id)
		if err != nil {
			return err
		}
		out = &kernel.Session{Meta: meta}
		out.Pending, err = readPending(txn, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("load session: %w", err)
	}
	return out, nil
}

// readPending reads and decodes the pending approval of id (nil when it
// has none).
func readPending(txn *bdg.Txn, id string) (*kernel.Approval, error) {
	item, err := txn.Get(pendingKey(id))
	switch {
	case errors.Is(err, bdg.ErrKeyNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	var a *kernel.Approval
	err = readValue(item, func(v []byte) error {
		var err error
		if a, err = decodePending(v); err != nil {
			return &kernel.CorruptError{Session: id, Part: "pending", Err: err}
		}
		return nil
	})
	return a, err
}

// readValue calls decode with item's value. A value kept in the value log
// whose entry fails Badger's checksum reads as no bytes, not as an error
// (Badger logs the failure and yields nothing: iterator.go,
// yieldItemValue); readValue turns that into errValueLog, so the damage
// is named for what it is rather than as an empty value.
func readValue(item *bdg.Item, decode func([]byte) error) error {
	return item.Value(func(v []byte) error {
		if len(v) == 0 && item.ValueSize() > 0 {
			return errValueLog
		}
		return decode(v)
	})
}

// readMeta reads and decodes the metadata of id.
func (s *Store) readMeta(txn *bdg.Txn, id string) (kernel.SessionMeta, error) {
	item, err := txn.Get(metaKey(id))
	if errors.Is(err, bdg.ErrKeyNotFound) {
		return kernel.SessionMeta{}, fmt.Errorf("session %q: %w", id, kernel.ErrSessionNotFound)
	}
	if err != nil {
		return kernel.SessionMeta{}, err
	}
	var meta kernel.SessionMeta
	err = readValue(item, func(v []byte) error {
		var err error
		meta, err = decodeMeta(v)
		return err
	})
	if err != nil {
		return kernel.SessionMeta{}, &kernel.CorruptError{Session: id, Part: "meta", Err: err}
	}
	meta.ID = id
	return meta, nil
}

// readLastSeq is readMeta for a writer that needs only the session's
// last seq (stage, on every commit): the value's checksum and version are
// checked as readMeta does, and its JSON is checked whole, but only
// last_seq is decoded; the times, labels and context a commit does not
// read are skipped.
// Why: RATIONALE.md, "A run through kernel serve, second round (issue 45)".
func (s *Store) readLastSeq(txn *bdg.Txn, id string) (uint64, error) {
	item, err := txn.Get(metaKey(id))
	if errors.Is(err, bdg.ErrKeyNotFound) {
		return 0, fmt.Errorf("session %q: %w", id, kernel.ErrSessionNotFound)
	}
	if err != nil {
		return 0, err
	}
	var last struct {
		LastSeq uint64 `json:"last_seq"`
	}
	err = readValue(item, func(v []byte) error { return decodeJSON(v, metaVersion, &last) })
	if err != nil {
		return 0, &kernel.CorruptError{Session: id, Part: "meta", Err: err}
	}
	return last.LastSeq, nil
}

// readMessages reads messages 1..last of id. Keys past last are ignored:
// they are leftovers of a write that never reached its commit point. A
// message whose value cannot be read gets a placeholder (damage.go), and
// lost says which and why.
func readMessages(ctx context.Context, txn *bdg.Txn, id string, last uint64) (msgs []kernel.Message, lost map[uint64]string, err error) {
	msgs = make([]kernel.Message, 0, min(last, 1<<16)) // last may be damaged
	p := msgPrefix(id)
	it := txn.NewIterator(bdg.IteratorOptions{Prefix: p})
	defer it.Close()
	for it.Seek(msgKey(id, 1)); it.Valid() && uint64(len(msgs)) < last; it.Next() {
		want := uint64(len(msgs)) + 1
		if want%1024 == 0 && ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		item := it.Item()
		seq, ok := parseMsgSeq(item.Key(), p)
		if !ok || seq != want {
			return nil, nil, &kernel.CorruptError{Session: id, Part: "message", Seq: want, Err: errors.New("missing from the store")}
		}
		msgs = append(msgs, kernel.Message{Seq: seq})
		err := readValue(item, func(v []byte) error { return decodeMessage(v, &msgs[len(msgs)-1]) })
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			if lost == nil {
				lost = map[uint64]string{}
			}
			lost[seq] = err.Error()
			msgs[len(msgs)-1] = rules.Placeholder(msgs[:len(msgs)-1], seq, err)
		}
	}
	if n := uint64(len(msgs)); n < last {
		return nil, nil, &kernel.CorruptError{Session: id, Part: "message", Seq: n + 1, Err: fmt.Errorf("missing from the store (the metadata says %d messages)", last)}
	}
	if lost != nil {
		lostSet := make(map[uint64]bool, len(lost))
		for s := range lost {
			lostSet[s] = true
		}
		rules.FixPlaceholders(msgs, lostSet)
	}
	return msgs, lost, nil
}

// List returns the metadata of every session, most recently updated
// first. Sessions past the TTL are left out. A session whose metadata
// cannot be decoded is listed with its id, StatusFailed, a title saying it
// is corrupt and the error under kernel.LabelCorrupt, so one damaged session
// neither hides the others nor disappears.
func (s *Store) List(ctx context.Context) ([]kernel.SessionMeta, error) {
	if s.remote != nil {
		return s.remoteList(ctx)
	}
	var out []kernel.SessionMeta
	err := s.scan(ctx, func(e scanEntry) error {
		switch {
		case e.orphan:
		case e.err != nil:
			out = append(out, kernel.SessionMeta{
				ID: e.id, Status: kernel.StatusFailed, Title: "(corrupt: " + e.err.Error() + ")",
				Labels: map[string]string{kernel.LabelCorrupt: e.err.Error()},
			})
		case !s.expired(&e.meta):
			out = append(out, e.meta)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	flagDamaged(s.dir, out)
	slices.SortStableFunc(out, func(a, b kernel.SessionMeta) int {
		if c := b.Updated.Compare(a.Updated); c != 0 {
			return c
		}
		return bytes.Compare([]byte(a.ID), []byte(b.ID))
	})
	return out, nil
}

// scanEntry is one session found by scan: its metadata, or the error
// decoding it, or orphan (message keys without metadata: the remains of an
// interrupted Delete or Import).
type scanEntry struct {
	id     string
	meta   kernel.SessionMeta
	err    error
	orphan bool
}

// scan calls fn for every session, seeking from one session's metadata
// straight to the next session, so it costs a few seeks per session
// whatever the sessions' lengths.
func (s *Store) scan(ctx context.Context, fn func(scanEntry) error) error {
	return s.db.View(func(txn *bdg.Txn) error {
		it := txn.NewIterator(bdg.IteratorOptions{Prefix: []byte(keyPrefix)})
		defer it.Close()
		for it.Rewind(); it.Valid(); {
			if err := ctx.Err(); err != nil {
				return err
			}
			id, ok := idOf(it.Item().Key())
			if !ok {
				it.Next()
				continue
			}
			mk := metaKey(id)
			it.Seek(mk)
			e := scanEntry{id: id}
			if it.Valid() && bytes.Equal(it.Item().Key(), mk) {
				e.err = readValue(it.Item(), func(v []byte) error {
					m, err := decodeMeta(v)
					e.meta = m
					return err
				})
				if e.err != nil {
					e.err = &kernel.CorruptError{Session: id, Part: "meta", Err: e.err}
				}
				e.meta.ID = id
			} else {
				e.orphan = true
			}
			if err := fn(e); err != nil {
				return err
			}
			it.Seek(sessionEnd(id))
		}
		return nil
	})
}

func (s *Store) expired(m *kernel.SessionMeta) bool {
	return s.opts.TTL > 0 && lastActive(m).Before(s.opts.Now().Add(-s.opts.TTL))
}

// lastActive is when a session was last updated (or created, for a
// session whose Updated was never set).
func lastActive(m *kernel.SessionMeta) time.Time {
	if m.Updated.IsZero() {
		return m.Created
	}
	return m.Updated
}

// liveMeta reads session id's meta, refusing a session past its TTL as
// not found.
func (s *Store) liveMeta(txn *bdg.Txn, id string) (kernel.SessionMeta, error) {
	meta, err := s.readMeta(txn, id)
	if err != nil {
		return meta, err
	}
	if s.expired(&meta) {
		return meta, fmt.Errorf("session %q expired (ttl %s): %w", id, s.opts.TTL, kernel.ErrSessionNotFound)
	}
	return meta, nil
}
