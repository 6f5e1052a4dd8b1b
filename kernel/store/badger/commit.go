package badger

import (
	"context"
	"errors"
	"fmt"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/internal/rules"
)

// Commit stores step as one synced Badger transaction (see kernel.Store).
// A step larger than one transaction allows is written in several, its
// messages first and the metadata last: messages past the stored LastSeq
// are invisible, so the step still appears all at once.
func (s *Store) Commit(ctx context.Context, id string, step kernel.Step) error {
	if err := rules.CheckID(id); err != nil {
		return fmt.Errorf("commit session: %w", err)
	}
	if s.opts.ReadOnly {
		return fmt.Errorf("commit session %s: %w", id, ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commit session %s: %w", id, err)
	}
	msgs := step.Messages
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Seq != msgs[0].Seq+uint64(i) {
			return fmt.Errorf("session %q: message %d has seq %d, want %d: %w", id, i, msgs[i].Seq, msgs[0].Seq+uint64(i), kernel.ErrSeqConflict)
		}
	}
	size := 0
	for i := range msgs {
		size += encodedSize(&msgs[i])
	}
	buf := make([]byte, 0, size)
	vals := make([][]byte, len(msgs))
	for i := range msgs {
		start := len(buf)
		buf = encodeMessage(buf, &msgs[i])
		vals[i] = buf[start:len(buf):len(buf)]
	}
	if err := s.checkSpace(int64(len(buf)), len(msgs) == 0); err != nil {
		return fmt.Errorf("commit session %s: %w", id, err)
	}

	mu := s.locks.of(id)
	mu.Lock()
	defer mu.Unlock()
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	var last uint64
	switch old, err := s.readMeta(txn, id); {
	case err == nil:
		last = old.LastSeq
	case !errors.Is(err, kernel.ErrSessionNotFound):
		return fmt.Errorf("commit session %s: %w", id, err)
	}
	if len(msgs) > 0 && msgs[0].Seq != last+1 {
		return fmt.Errorf("session %q: first message has seq %d, want %d: %w", id, msgs[0].Seq, last+1, kernel.ErrSeqConflict)
	}
	meta := step.Meta
	meta.ID = id
	meta.LastSeq = last + uint64(len(msgs))
	metaVal, err := encodeMeta(&meta)
	if err != nil {
		return fmt.Errorf("commit session %s: encode meta: %w", id, err)
	}
	var pendVal []byte
	if step.Pending != nil {
		if pendVal, err = encodePending(step.Pending); err != nil {
			return fmt.Errorf("commit session %s: encode pending approval: %w", id, err)
		}
	}
	// finish adds the commit point (meta and pending) to txn.
	finish := func(txn *bdg.Txn) error {
		if step.ClearPending && pendVal == nil {
			if err := txn.Delete(pendingKey(id)); err != nil {
				return err
			}
		}
		if pendVal != nil {
			if err := txn.Set(pendingKey(id), pendVal); err != nil {
				return err
			}
		}
		return txn.Set(metaKey(id), metaVal)
	}
	err = nil
	for i := range msgs {
		if err = txn.Set(msgKey(id, msgs[i].Seq), vals[i]); err != nil {
			break
		}
	}
	if err == nil {
		err = finish(txn)
	}
	if errors.Is(err, bdg.ErrTxnTooBig) {
		txn.Discard()
		txn = s.db.NewTransaction(true)
		err = s.commitLarge(&txn, id, msgs, vals, finish)
	}
	if err == nil {
		err = txn.Commit()
	}
	if err != nil {
		return fmt.Errorf("commit session %s: %w", id, err)
	}
	return nil
}

// commitLarge writes the messages of a step too large for one transaction
// in as many synced transactions as they need, then leaves the commit
// point in *txn for the caller to commit.
func (s *Store) commitLarge(txn **bdg.Txn, id string, msgs []kernel.Message, vals [][]byte, finish func(*bdg.Txn) error) error {
	for i := range msgs {
		k := msgKey(id, msgs[i].Seq)
		err := (*txn).Set(k, vals[i])
		if errors.Is(err, bdg.ErrTxnTooBig) {
			if err := (*txn).Commit(); err != nil {
				return err
			}
			*txn = s.db.NewTransaction(true)
			err = (*txn).Set(k, vals[i])
		}
		if err != nil {
			return err
		}
	}
	if err := (*txn).Commit(); err != nil {
		return err
	}
	*txn = s.db.NewTransaction(true)
	return finish(*txn)
}

// checkSpace fails with ErrDiskFull when the store's file system has less
// than the reserve plus n bytes free. A step without messages (a status
// change) may use half the reserve, so a run that failed for lack of space
// can still record that it failed.
func (s *Store) checkSpace(n int64, metaOnly bool) error {
	if s.reserve < 0 {
		return nil
	}
	reserve := s.reserve
	if metaOnly {
		reserve /= 2
	}
	free, ok := freeBytes(s.dir)
	if !ok || free >= reserve+n {
		return nil
	}
	return fmt.Errorf("%w: %s has %s free, a write of %s needs %s more in reserve (Options.MinFreeBytes); free some space and retry",
		ErrDiskFull, s.dir, mib(free), mib(n), mib(reserve))
}

func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// CheckSpace fails with ErrDiskFull when the store's file system cannot
// hold one more step of step bytes on top of the reserve (see
// Options.MinFreeBytes). `kernel run` and `chat` call it before a session
// is announced, so a full volume fails at once instead of after printing
// "session … (new)".
func (s *Store) CheckSpace(step int64) error {
	if s.opts.ReadOnly {
		return nil
	}
	if err := s.checkSpace(step, false); err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	return nil
}
