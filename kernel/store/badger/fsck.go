package badger

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/agentkernel/agentkernel/kernel"
)

// FsckSession is what Fsck found in one session.
type FsckSession struct {
	ID       string
	Messages int // message values read
	// Damaged maps the sequence number of each message that cannot be
	// read to the reason (a checksum mismatch in the value log or in the
	// value itself, a value that does not decode, a missing message).
	Damaged map[uint64]string
	// Meta and Pending are the errors reading those parts, if any.
	Meta    error
	Pending error
	// Repaired is set when Fsck stored placeholders for the damaged
	// messages (repair mode).
	Repaired bool
}

// OK reports whether nothing in the session is damaged.
func (f *FsckSession) OK() bool { return len(f.Damaged) == 0 && f.Meta == nil && f.Pending == nil }

// FsckReport is the result of Fsck.
type FsckReport struct {
	Sessions []FsckSession
	// Quarantined lists the copies of damaged value logs kept in the
	// store's quarantine directory.
	Quarantined []string
}

// Damaged counts the sessions with damage.
func (r *FsckReport) Damaged() int {
	n := 0
	for i := range r.Sessions {
		if !r.Sessions[i].OK() {
			n++
		}
	}
	return n
}

// Fsck reads every value of every session (or of ids, when given): each
// value-log entry's CRC (Badger's, with VerifyValueChecksum) and each
// value's own CRC-32C and encoding. It records what it finds in the
// damage record `sessions ls` reads. With repair, each damaged message is
// replaced for good by the placeholder Load shows in its place (the lost
// content stays in the quarantined copy, if any), so the session is whole
// again; damaged metadata is only reported (`sessions rm` removes such a
// session). It needs a read-write store.
func (s *Store) Fsck(ctx context.Context, ids []string, repair bool) (*FsckReport, error) {
	if s.opts.ReadOnly {
		return nil, fmt.Errorf("fsck: %w", ErrReadOnly)
	}
	rep := &FsckReport{}
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

func (s *Store) fsckSession(ctx context.Context, id string, repair bool) (*FsckSession, error) {
	if err := checkID(id); err != nil {
		return nil, fmt.Errorf("%w: %w", err, kernel.ErrSessionNotFound)
	}
	mu := s.locks.of(id)
	mu.Lock()
	defer mu.Unlock()
	f := &FsckSession{ID: id}
	var msgs []kernel.Message
	var last uint64
	err := s.db.View(func(txn *bdg.Txn) error {
		meta, err := s.readMeta(txn, id)
		if errors.Is(err, kernel.ErrSessionNotFound) {
			return err
		}
		f.Meta = err
		last = meta.LastSeq
		if item, err := txn.Get(pendingKey(id)); err == nil {
			f.Pending = readValue(item, func(v []byte) error { _, err := decodePending(v); return err })
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
				f.damage(want, "missing from the store")
				msgs = append(msgs, kernel.Message{Seq: want})
			}
			want = seq + 1
			f.Messages++
			m := kernel.Message{Seq: seq}
			if err := readValue(it.Item(), func(v []byte) error { return decodeMessage(v, &m) }); err != nil {
				f.damage(seq, err.Error())
			}
			msgs = append(msgs, m)
		}
		for ; f.Meta == nil && want <= last; want++ {
			f.damage(want, "missing from the store")
			msgs = append(msgs, kernel.Message{Seq: want})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !repair || len(f.Damaged) == 0 || f.Meta != nil {
		return f, nil
	}
	// Build the placeholders in order, as Load does, and store them.
	lost := map[uint64]bool{}
	for i := range msgs {
		if reason, bad := f.Damaged[msgs[i].Seq]; bad {
			lost[msgs[i].Seq] = true
			msgs[i] = placeholder(msgs[:i], msgs[i].Seq, errors.New(reason))
		}
	}
	fixPlaceholders(msgs, lost)
	seqs := make([]uint64, 0, len(lost))
	for q := range lost {
		seqs = append(seqs, q)
	}
	slices.Sort(seqs)
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

func (f *FsckSession) damage(seq uint64, why string) {
	if f.Damaged == nil {
		f.Damaged = map[uint64]string{}
	}
	f.Damaged[seq] = why
}
