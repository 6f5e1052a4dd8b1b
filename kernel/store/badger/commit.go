package badger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/internal/rules"
)

// Commit stores step as one synced Badger transaction (see kernel.Store).
// A step larger than one transaction allows is written in several, its
// messages first and the metadata last: messages past the stored LastSeq
// are invisible, so the step still appears all at once.
func (s *Store) Commit(ctx context.Context, id string, step kernel.Step) error {
	_, err := s.commit(ctx, id, step, nil, 0)
	return err
}

// CommitWithEvents stores step and events in one synced Badger
// transaction (kernel.StepEventCommitter): the events take the next Seq
// values of the session's log, and are stored if and only if the step is.
// The fence is ignored, as by Commit and AppendEvents.
func (s *Store) CommitWithEvents(ctx context.Context, id string, step kernel.Step, events []kernel.StoredEvent) (uint64, error) {
	if len(events) == 0 {
		return 0, s.Commit(ctx, id, step)
	}
	evals, size, err := encodeEvents(events)
	if err != nil {
		return 0, fmt.Errorf("commit session %s: %w", id, err)
	}
	return s.commit(ctx, id, step, evals, size)
}

// commit is Commit, with the encoded events evals (of esize bytes in all)
// stored in the step's transaction when there are any; it returns the
// Seq of the first.
func (s *Store) commit(ctx context.Context, id string, step kernel.Step, evals [][]byte, esize int) (uint64, error) {
	if err := rules.CheckID(id); err != nil {
		return 0, fmt.Errorf("commit session: %w", err)
	}
	if s.opts.ReadOnly {
		return 0, fmt.Errorf("commit session %s: %w", id, ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("commit session %s: %w", id, err)
	}
	msgs := step.Messages
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Seq != msgs[0].Seq+uint64(i) {
			return 0, fmt.Errorf("session %q: message %d has seq %d, want %d: %w", id, i, msgs[i].Seq, msgs[0].Seq+uint64(i), kernel.ErrSeqConflict)
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
	if err := s.checkSpace(int64(len(buf)+esize), len(msgs) == 0 && len(evals) == 0); err != nil {
		return 0, fmt.Errorf("commit session %s: %w", id, err)
	}

	j := &job{id: id, step: &step, vals: vals, size: len(buf) + esize}
	mu := s.locks.of(id)
	mu.Lock()
	defer mu.Unlock()
	var first, last uint64
	if len(evals) > 0 {
		// The event lock, taken after the session's (as Delete does),
		// orders the events with the session's other appends.
		emu := s.events.locks.of(id)
		emu.Lock()
		defer emu.Unlock()
		var err error
		if last, err = s.lastEvent(id, false); err != nil {
			return 0, fmt.Errorf("commit session %s: %w", id, err)
		}
		first = last + 1
		j.ekeys = make([][]byte, len(evals))
		for i := range evals {
			j.ekeys[i] = eventKey(id, first+uint64(i))
		}
		j.evals = evals
	}
	var err error
	if j.size > groupStepMax || len(msgs)+len(evals) > groupStepMsgs {
		err = s.commitAlone(j)
	} else {
		err = s.commitGrouped(j)
	}
	if err != nil {
		if len(evals) > 0 {
			s.events.forget(id)
		}
		return 0, fmt.Errorf("commit session %s: %w", id, err)
	}
	if len(evals) > 0 {
		s.events.set(id, last+uint64(len(evals)))
	}
	return first, nil
}

// job is one Commit's step, or one AppendEvents' events, on its way into
// a transaction.
type job struct {
	id   string
	step *kernel.Step // nil: events
	keys [][]byte     // the events' keys
	vals [][]byte     // the messages' or the events' values
	// ekeys and evals are the events stored with a step
	// (CommitWithEvents).
	ekeys, evals [][]byte
	size         int
	err          error       // the outcome, set by whoever committed the job
	done         chan result // a waiting job's outcome, or its turn to lead
	point        []setOrDelete
}

type result struct {
	err  error
	lead bool
}

type setOrDelete struct {
	key, val []byte // val nil: delete
}

// stage reads the session's last seq in txn, checks the step against it
// and adds its messages to txn; j.point is then the commit point (the
// metadata and the pending approval) for finish to add.
func (s *Store) stage(txn *bdg.Txn, j *job) error {
	msgs := j.step.Messages
	last, err := s.readLastSeq(txn, j.id)
	if err != nil && !errors.Is(err, kernel.ErrSessionNotFound) {
		return err
	}
	if len(msgs) > 0 && msgs[0].Seq != last+1 {
		return fmt.Errorf("session %q: first message has seq %d, want %d: %w", j.id, msgs[0].Seq, last+1, kernel.ErrSeqConflict)
	}
	meta := j.step.Meta
	meta.ID = j.id
	meta.LastSeq = last + uint64(len(msgs))
	metaVal, err := encodeMeta(&meta)
	if err != nil {
		return fmt.Errorf("encode meta: %w", err)
	}
	j.point = j.point[:0]
	switch {
	case j.step.Pending != nil:
		pendVal, err := encodePending(j.step.Pending)
		if err != nil {
			return fmt.Errorf("encode pending approval: %w", err)
		}
		j.point = append(j.point, setOrDelete{pendingKey(j.id), pendVal})
	case j.step.ClearPending:
		j.point = append(j.point, setOrDelete{key: pendingKey(j.id)})
	}
	j.point = append(j.point, setOrDelete{metaKey(j.id), metaVal})
	return nil
}

// setMessages adds j's messages to txn.
func (j *job) setMessages(txn *bdg.Txn) error {
	for i, m := range j.step.Messages {
		if err := txn.Set(msgKey(j.id, m.Seq), j.vals[i]); err != nil {
			return err
		}
	}
	return nil
}

// setEvents adds j's events to txn.
func (j *job) setEvents(txn *bdg.Txn) error {
	for i, k := range j.keys {
		if err := txn.Set(k, j.vals[i]); err != nil {
			return err
		}
	}
	return nil
}

// setStepEvents adds the events stored with j's step to txn.
func (j *job) setStepEvents(txn *bdg.Txn) error {
	for i, k := range j.ekeys {
		if err := txn.Set(k, j.evals[i]); err != nil {
			return err
		}
	}
	return nil
}

// finish adds j's commit point to txn.
func (j *job) finish(txn *bdg.Txn) error {
	for _, p := range j.point {
		var err error
		if p.val == nil {
			err = txn.Delete(p.key)
		} else {
			err = txn.Set(p.key, p.val)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// commitAlone commits j in a transaction of its own (several when it is
// larger than one allows).
func (s *Store) commitAlone(j *job) error {
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	if j.step == nil {
		if err := j.setEvents(txn); err != nil {
			return err
		}
		return txn.Commit()
	}
	if err := s.stage(txn, j); err != nil {
		return err
	}
	err := j.setMessages(txn)
	if err == nil {
		err = j.setStepEvents(txn)
	}
	if err == nil {
		err = j.finish(txn)
	}
	if errors.Is(err, bdg.ErrTxnTooBig) {
		// The events go with the commit point: stored if and only if
		// the step is.
		txn.Discard()
		txn = s.db.NewTransaction(true)
		err = s.commitLarge(&txn, j.id, j.step.Messages, j.vals, func(txn *bdg.Txn) error {
			if err := j.setStepEvents(txn); err != nil {
				return err
			}
			return j.finish(txn)
		})
	}
	if err == nil {
		err = txn.Commit()
	}
	return err
}

// Group commit. Every synced Badger transaction costs a sync of its log,
// however small it is, so steps of different sessions, and the event
// batches kernel serve appends, committed at the same time share one: the first Commit to arrive leads, committing the
// steps queued so far in one transaction; those that arrive meanwhile
// queue, and the first of them leads the next transaction when this one
// is done. A Commit returns when the transaction holding its step is
// synced, so "acknowledged means durable" holds as before. Each queued
// step holds its session's lock (Commit's), so a transaction holds at most
// one step of a session, and a session's steps commit in order; a queued
// event batch holds its session's event lock (AppendEvents') the same way.
//
// A step larger than groupStepMax (or of more than groupStepMsgs
// messages) commits alone, so a group stays far below the transaction size
// Badger allows; a group Badger refuses anyway is committed step by step.
const (
	groupStepMax  = 64 << 10
	groupStepMsgs = 64
	groupMax      = 512 << 10
)

// group is the queue of steps waiting for a transaction.
type group struct {
	mu    sync.Mutex
	busy  bool // a leader is committing
	queue []*job
}

// commitGrouped commits j in a transaction it shares with the steps
// committed at the same time.
func (s *Store) commitGrouped(j *job) error {
	g := &s.group
	g.mu.Lock()
	g.queue = append(g.queue, j)
	if g.busy {
		j.done = make(chan result, 1)
		g.mu.Unlock()
		r := <-j.done
		if !r.lead {
			return r.err
		}
		g.mu.Lock()
	}
	g.busy = true
	// Lead: take what is queued, up to groupMax bytes (j is first).
	n, size := 0, 0
	for n < len(g.queue) && (n == 0 || size+g.queue[n].size <= groupMax) {
		size += g.queue[n].size
		n++
	}
	batch := slices.Clone(g.queue[:n])
	g.queue = slices.Delete(g.queue, 0, n)
	g.mu.Unlock()

	if beforeBatch != nil {
		beforeBatch(len(batch))
	}
	s.commitBatch(batch)

	g.mu.Lock()
	if len(g.queue) > 0 {
		g.queue[0].done <- result{lead: true}
	} else {
		g.busy = false
	}
	g.mu.Unlock()
	for _, b := range batch[1:] {
		b.done <- result{err: b.err}
	}
	return j.err
}

// commitBatch commits the steps of batch in one transaction and sets each
// one's err: its own error when its step does not fit its session (a seq
// conflict), the transaction's otherwise.
func (s *Store) commitBatch(batch []*job) {
	if len(batch) == 1 {
		batch[0].err = s.commitAlone(batch[0])
		return
	}
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	staged := make([]*job, 0, len(batch))
	for _, b := range batch {
		var err error
		if b.step == nil {
			err = b.setEvents(txn)
		} else {
			if b.err = s.stage(txn, b); b.err != nil {
				continue
			}
			if err = b.setMessages(txn); err == nil {
				if err = b.setStepEvents(txn); err == nil {
					err = b.finish(txn)
				}
			}
		}
		if err != nil {
			// Refused before anything was written (too big for one
			// transaction): commit each step alone.
			txn.Discard()
			for _, b := range batch {
				b.err = s.commitAlone(b)
			}
			return
		}
		staged = append(staged, b)
	}
	err := txn.Commit()
	for _, b := range staged {
		b.err = err
	}
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
