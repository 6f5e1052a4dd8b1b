package badger

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/internal/rules"
)

// Fsck reads every value of every session (or of ids, when given): each
// value-log entry's CRC (Badger's, with VerifyValueChecksum) and each
// value's own CRC-32C and encoding; a session that reads whole is held to
// kernel.CheckHistory (reported, never repaired). It records what it finds in the
// damage record `sessions ls` reads. With repair, each damaged message is
// replaced for good by the placeholder Load shows in its place (the lost
// content stays in the quarantined copy, if any), so the session is whole
// again; damaged metadata is only reported (`sessions rm` removes such a
// session). It needs a read-write store.
func (s *Store) Fsck(ctx context.Context, ids []string, repair bool) (*kernel.FsckReport, error) {
	if s.opts.ReadOnly {
		return nil, fmt.Errorf("fsck: %w", ErrReadOnly)
	}
	rep := &kernel.FsckReport{}
	if len(ids) == 0 {
		err := s.scan(ctx, func(e scanEntry) error {
			if !e.orphan {
				ids = append(ids, e.id)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("fsck: %w", err)
		}
	}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		f, err := s.fsckSession(ctx, id, repair)
		if err != nil {
			return rep, fmt.Errorf("fsck: %w", err)
		}
		rep.Sessions = append(rep.Sessions, *f)
	}
	err := updateDamage(s.dir, func(d damageRecord) {
		for _, f := range rep.Sessions {
			if f.Repaired || len(f.Damaged) == 0 {
				delete(d, f.ID)
				continue
			}
			d[f.ID] = f.Damaged
		}
	})
	if err != nil {
		return rep, fmt.Errorf("fsck: record the damage: %w", err)
	}
	rep.Quarantined, _ = filepath.Glob(filepath.Join(s.dir, quarantineDir, "*.vlog.*"))
	return rep, nil
}

func (s *Store) fsckSession(ctx context.Context, id string, repair bool) (*kernel.FsckSession, error) {
	if err := rules.CheckID(id); err != nil {
		return nil, fmt.Errorf("%w: %w", err, kernel.ErrSessionNotFound)
	}
	mu := s.locks.of(id)
	mu.Lock()
	defer mu.Unlock()
	f := &kernel.FsckSession{ID: id}
	var msgs []kernel.Message
	var pending *kernel.Approval
	var last uint64
	err := s.db.View(func(txn *bdg.Txn) error {
		meta, err := s.readMeta(txn, id)
		if errors.Is(err, kernel.ErrSessionNotFound) {
			return err
		}
		f.Meta = err
		last = meta.LastSeq
		if item, err := txn.Get(pendingKey(id)); err == nil {
			f.Pending = readValue(item, func(v []byte) error { pending, err = decodePending(v); return err })
		} else if !errors.Is(err, bdg.ErrKeyNotFound) {
			f.Pending = err
		}
		p := msgPrefix(id)
		it := txn.NewIterator(bdg.IteratorOptions{Prefix: p})
		defer it.Close()
		want := uint64(1)
		for it.Rewind(); it.Valid(); it.Next() {
			seq, ok := parseMsgSeq(it.Item().Key(), p)
			if !ok || f.Meta == nil && seq > last {
				break // leftovers past the commit point (GC removes them)
			}
			for ; want < seq; want++ {
				damage(f, want, "missing from the store")
				msgs = append(msgs, kernel.Message{Seq: want})
			}
			want = seq + 1
			f.Messages++
			m := kernel.Message{Seq: seq}
			if err := readValue(it.Item(), func(v []byte) error { return decodeMessage(v, &m) }); err != nil {
				damage(f, seq, err.Error())
			}
			msgs = append(msgs, m)
		}
		for ; f.Meta == nil && want <= last; want++ {
			damage(f, want, "missing from the store")
			msgs = append(msgs, kernel.Message{Seq: want})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(f.Damaged) == 0 && f.Meta == nil && f.Pending == nil {
		f.Problems = kernel.CheckHistory(msgs, pending)
	}
	if !repair || len(f.Damaged) == 0 || f.Meta != nil {
		return f, nil
	}
	seqs := rules.Placeholders(msgs, f.Damaged)
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, q := range seqs {
		m := msgs[q-1]
		if err := wb.Set(msgKey(id, q), encodeMessage(nil, &m)); err != nil {
			return nil, err
		}
	}
	if err := wb.Flush(); err != nil {
		return nil, fmt.Errorf("repair session %s: %w", id, err)
	}
	f.Repaired = true
	return f, nil
}

// damage records that message seq of f cannot be read, and why.
func damage(f *kernel.FsckSession, seq uint64, why string) {
	if f.Damaged == nil {
		f.Damaged = map[uint64]string{}
	}
	f.Damaged[seq] = why
}
