package badger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/agentkernel/agentkernel/kernel"
)

// gcLoop is the store's background goroutine: the TTL sweep at once, then
// the sweep and value-log GC every GCInterval, until Close.
func (s *Store) gcLoop() {
	defer s.wg.Done()
	// ctx is cancelled at Close, so a long sweep stops early.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	s.sweep(ctx)
	if s.opts.GCInterval < 0 {
		return
	}
	t := time.NewTicker(s.opts.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.sweep(ctx)
			s.gcMu.Lock()
			s.valueLogGC()
			s.gcMu.Unlock()
		}
	}
}

// sweep deletes the sessions past the TTL and the remains of interrupted
// deletes. Failures are logged: the next sweep retries.
func (s *Store) sweep(ctx context.Context) {
	if s.opts.TTL <= 0 {
		return
	}
	removed, err := s.GC(ctx, s.opts.TTL)
	if err != nil && ctx.Err() == nil {
		s.opts.Logger.Warn("session TTL sweep failed", "dir", s.dir, "error", err)
	}
	if len(removed) > 0 {
		s.opts.Logger.Info("expired sessions removed", "dir", s.dir, "count", len(removed), "ttl", s.opts.TTL)
	}
}

// valueLogGC rewrites value-log files that are at least half garbage, a
// few at most. The caller holds gcMu.
func (s *Store) valueLogGC() {
	for range 8 {
		err := s.db.RunValueLogGC(0.5)
		if err == nil {
			continue
		}
		if !errors.Is(err, bdg.ErrNoRewrite) && !errors.Is(err, bdg.ErrRejected) {
			s.opts.Logger.Warn("value log GC failed", "dir", s.dir, "error", err)
		}
		return
	}
}

// GC deletes every session not updated for olderThan (for `kernel
// sessions gc --older-than 30d`), and the invisible remains of interrupted
// deletes, imports and oversized commits. It returns the ids of the
// deleted sessions, sorted. A session whose metadata is corrupt has no
// known age and is kept (Delete removes it).
func (s *Store) GC(ctx context.Context, olderThan time.Duration) (removed []string, err error) {
	if s.opts.ReadOnly {
		return nil, fmt.Errorf("gc sessions: %w", ErrReadOnly)
	}
	if olderThan <= 0 {
		return nil, fmt.Errorf("gc sessions: the age must be positive, not %s", olderThan)
	}
	cutoff := s.opts.Now().Add(-olderThan)
	var old, orphans []string
	var tails []scanEntry
	err = s.scan(ctx, func(e scanEntry) error {
		switch {
		case e.orphan:
			orphans = append(orphans, e.id)
		case e.err != nil:
		case lastActive(&e.meta).Before(cutoff):
			old = append(old, e.id)
		default:
			tails = append(tails, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("gc sessions: %w", err)
	}
	for _, id := range old {
		switch err := s.Delete(ctx, id); {
		case err == nil:
			removed = append(removed, id)
		case errors.Is(err, kernel.ErrSessionNotFound): // deleted meanwhile
		default:
			return removed, fmt.Errorf("gc sessions: %w", err)
		}
	}
	for _, id := range orphans {
		if err := s.dropOrphan(ctx, id); err != nil {
			return removed, fmt.Errorf("gc sessions: %w", err)
		}
	}
	for _, e := range tails {
		if err := s.dropTail(ctx, e.id); err != nil {
			return removed, fmt.Errorf("gc sessions: %w", err)
		}
	}
	slices.Sort(removed)
	return removed, nil
}

// dropOrphan deletes the keys of a session that has no metadata.
func (s *Store) dropOrphan(ctx context.Context, id string) error {
	mu := s.locks.of(id)
	mu.Lock()
	defer mu.Unlock()
	var exists bool
	err := s.db.View(func(txn *bdg.Txn) error {
		_, err := txn.Get(metaKey(id))
		exists = err == nil
		if errors.Is(err, bdg.ErrKeyNotFound) {
			return nil
		}
		return err
	})
	if err != nil || exists {
		return err
	}
	if err := s.db.Update(func(txn *bdg.Txn) error { return txn.Delete(pendingKey(id)) }); err != nil {
		return err
	}
	if err := s.deleteMessages(ctx, id, 1); err != nil {
		return err
	}
	return s.deleteEvents(ctx, id)
}

// dropTail deletes the messages of id past its LastSeq: an oversized
// commit interrupted before its commit point.
func (s *Store) dropTail(ctx context.Context, id string) error {
	mu := s.locks.of(id)
	mu.Lock()
	defer mu.Unlock()
	var last uint64
	var tail bool
	err := s.db.View(func(txn *bdg.Txn) error {
		m, err := s.readMeta(txn, id)
		if err != nil {
			return err
		}
		last = m.LastSeq
		it := txn.NewIterator(bdg.IteratorOptions{Prefix: msgPrefix(id)})
		defer it.Close()
		it.Seek(msgKey(id, last+1))
		tail = it.Valid()
		return nil
	})
	if errors.Is(err, kernel.ErrSessionNotFound) || errors.Is(err, kernel.ErrCorrupt) {
		return nil
	}
	if err != nil || !tail {
		return err
	}
	return s.deleteMessages(ctx, id, last+1)
}
