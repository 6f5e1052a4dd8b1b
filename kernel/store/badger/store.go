// Package badger is a kernel.Store on an embedded Badger database
// (dgraph-io/badger/v4): write-through, crash-safe session persistence for
// the kernel CLI and server.
//
// Every Commit is one Badger transaction holding all the step's messages,
// the session's metadata and its pending approval, written with
// SyncWrites: when Commit returns, the step survives kill -9 and power
// loss, and a step is never half written. A store directory is held by one
// process at a time; a second Open fails with ErrLocked.
//
// The lifecycle:
//
//  1. Open(dir, Options{}) creates or opens the store and starts its
//     background goroutine (value-log GC and the TTL sweep).
//  2. Hand the *Store to kernel.Config.Store; use Delete, GC, Export and
//     Import for the session commands.
//  3. Close stops the goroutine, runs a last value-log GC and closes Badger.
//
// docs/sessions.md describes the layout, the guarantees and the tuning.
package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	bdg "github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/kernel"
)

// Errors callers branch on with errors.Is.
var (
	// ErrLocked: another process (or another Store in this process) has
	// the directory open.
	ErrLocked = errors.New("store is locked")
	// ErrReadOnly: a write to a store opened with Options.ReadOnly.
	ErrReadOnly = errors.New("store is read-only")
	// ErrDiskFull: the file system has less free space than a write
	// needs (see Options.MinFreeBytes). Nothing was written.
	ErrDiskFull = errors.New("not enough free disk space")
	// ErrSessionExists: Import of a session whose id is taken.
	ErrSessionExists = errors.New("session already exists")
)

// LabelCorrupt is the label List puts on the entry of a session whose
// metadata cannot be decoded; its value is the error.
const LabelCorrupt = "store.corrupt"

// Options configures Open. The zero value is a read-write store sized for
// a short-lived CLI process, with no TTL and GC every 10 minutes.
type Options struct {
	// ReadOnly opens the store for reading only: Commit, Delete, Import and
	// GC fail with ErrReadOnly, no background goroutine runs, and no file
	// of the store is written. When the store is free, readers share
	// Badger's lock (a writer's Open waits up to a second for them). When a
	// writer holds it, or a crashed writer left it unclean, the Store reads
	// a snapshot: a private copy in a subdirectory (tables hard-linked, logs
	// copied) that holds every step committed before Open, removed at
	// Close.
	ReadOnly bool `yaml:"read_only" json:"read_only"`
	// TTL, when positive, expires sessions not updated for that long: Load
	// and List stop seeing them at once, and the background sweep deletes
	// them. Zero keeps sessions until they are removed.
	TTL time.Duration `yaml:"ttl" json:"ttl"`
	// GCInterval is how often the background goroutine runs value-log GC
	// and the TTL sweep (default 10 minutes). Negative disables the
	// schedule; GC still runs at Open (the sweep) and Close (value log).
	GCInterval time.Duration `yaml:"gc_interval" json:"gc_interval"`
	// Server sizes Badger for a long-running server (64 MiB memtables,
	// 256 MiB block cache, Snappy, 4 compactors) instead of a CLI process
	// (8 MiB memtable, 4 MiB block cache, no compression, 2 compactors).
	Server bool `yaml:"server" json:"server"`
	// MinFreeBytes is the free space a write requires on the store's file
	// system, on top of the write's own size: a write below it fails with
	// ErrDiskFull instead of letting Badger run out of space inside a
	// memory-mapped file, which kills the process. Zero means the default
	// (48 MiB for the CLI sizing, 272 MiB for Server); negative disables
	// the check.
	MinFreeBytes int64 `yaml:"min_free_bytes" json:"min_free_bytes"`
	// Logger receives Badger's log lines (default: hclog on stderr at warn
	// level, named "store").
	Logger hclog.Logger `yaml:"-" json:"-"`
	// Tune, when set, edits the Badger options last. SyncWrites must stay
	// on or Commit loses its durability.
	Tune func(bdg.Options) bdg.Options `yaml:"-" json:"-"`
	// Now is the clock of TTL and GC (default time.Now).
	Now func() time.Time `yaml:"-" json:"-"`
}

// Store is a kernel.Store in a Badger directory. It is safe for concurrent
// use.
type Store struct {
	dir      string
	snapshot string // the private copy a read-only Store reads, if any
	db       *bdg.DB
	opts     Options
	reserve  int64
	locks    locks

	gcMu      sync.Mutex // one GC at a time
	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating it when needed, unless ReadOnly) the store in dir.
// A read-write Open fails with ErrLocked when another process (or Store)
// holds dir; a read-only Open then reads a snapshot (see
// Options.ReadOnly).
func Open(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("open session store: empty directory name")
	}
	if opts.Logger == nil {
		opts.Logger = defaultLogger()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.GCInterval == 0 {
		opts.GCInterval = 10 * time.Minute
	}
	if opts.TTL < 0 {
		return nil, fmt.Errorf("open session store %s: negative ttl %s", dir, opts.TTL)
	}
	t := cliTuning
	if opts.Server {
		t = serverTuning
	}
	if opts.ReadOnly {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("open session store %s read-only: %w", dir, err)
		}
		// Badger would refuse (and log an error about) a store a writer
		// holds or a crashed writer left: go straight to the snapshot.
		if h := probeLock(dir); h == heldByWriter || h == heldByNobody && hasMemFiles(dir) {
			return openSnapshot(dir, opts, t)
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open session store: %w", err)
	}
	db, err := bdg.Open(opts.badgerOptions(dir, t))
	// A writer waits up to a second for readers (short-lived commands such
	// as `kernel sessions ls`) to let go of the store.
	for wait := time.Now().Add(time.Second); err != nil && !opts.ReadOnly && probeLock(dir) == heldByReaders && time.Now().Before(wait); {
		time.Sleep(20 * time.Millisecond)
		db, err = bdg.Open(opts.badgerOptions(dir, t))
	}
	if err != nil {
		h := probeLock(dir)
		switch {
		case opts.ReadOnly && (h == heldByWriter || h == heldByNobody && hasMemFiles(dir)):
			return openSnapshot(dir, opts, t)
		case h != heldByNobody:
			return nil, lockedError(dir, h)
		}
		return nil, fmt.Errorf("open session store %s: %w", dir, err)
	}
	if !opts.ReadOnly {
		removeStaleSnapshots(dir)
	}
	s := &Store{dir: dir, db: db, opts: opts, reserve: opts.MinFreeBytes, stop: make(chan struct{})}
	if s.reserve == 0 {
		s.reserve = t.reserve()
	}
	if !opts.ReadOnly {
		s.wg.Add(1)
		go s.gcLoop()
	}
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Close stops the background goroutine, runs value-log GC once and closes
// the database. Calling it again returns the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.wg.Wait()
		if !s.opts.ReadOnly {
			s.gcMu.Lock()
			s.valueLogGC()
			s.gcMu.Unlock()
		}
		if err := s.db.Close(); err != nil && s.snapshot == "" {
			s.closeErr = fmt.Errorf("close session store %s: %w", s.dir, err)
		}
		if s.snapshot != "" {
			if err := os.RemoveAll(s.snapshot); err != nil {
				s.closeErr = fmt.Errorf("close session store %s: remove snapshot: %w", s.dir, err)
			}
		}
	})
	return s.closeErr
}

// Load returns the session id: its metadata, its messages 1..LastSeq and
// its pending approval. A damaged value fails with a *CorruptError naming
// the session and the message's sequence number.
func (s *Store) Load(ctx context.Context, id string) (*kernel.Session, error) {
	if err := checkID(id); err != nil {
		return nil, fmt.Errorf("load session: %w: %w", err, kernel.ErrSessionNotFound)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *kernel.Session
	err := s.db.View(func(txn *bdg.Txn) error {
		meta, err := s.readMeta(txn, id)
		if err != nil {
			return err
		}
		if s.expired(&meta) {
			return fmt.Errorf("session %q expired (ttl %s): %w", id, s.opts.TTL, kernel.ErrSessionNotFound)
		}
		msgs, err := readMessages(ctx, txn, id, meta.LastSeq)
		if err != nil {
			return err
		}
		out = &kernel.Session{Meta: meta, Messages: msgs}
		item, err := txn.Get(pendingKey(id))
		switch {
		case errors.Is(err, bdg.ErrKeyNotFound):
			return nil
		case err != nil:
			return err
		}
		return item.Value(func(v []byte) error {
			a, err := decodePending(v)
			if err != nil {
				return &CorruptError{Session: id, Part: "pending", Err: err}
			}
			out.Pending = a
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("load session: %w", err)
	}
	return out, nil
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
	err = item.Value(func(v []byte) error {
		var err error
		meta, err = decodeMeta(v)
		return err
	})
	if err != nil {
		return kernel.SessionMeta{}, &CorruptError{Session: id, Part: "meta", Err: err}
	}
	meta.ID = id
	return meta, nil
}

// readMessages reads messages 1..last of id. Keys past last are ignored:
// they are leftovers of a write that never reached its commit point.
func readMessages(ctx context.Context, txn *bdg.Txn, id string, last uint64) ([]kernel.Message, error) {
	msgs := make([]kernel.Message, 0, last)
	p := msgPrefix(id)
	it := txn.NewIterator(bdg.IteratorOptions{Prefix: p})
	defer it.Close()
	for it.Seek(msgKey(id, 1)); it.Valid() && uint64(len(msgs)) < last; it.Next() {
		want := uint64(len(msgs)) + 1
		if want%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		item := it.Item()
		seq, ok := parseMsgSeq(item.Key(), p)
		if !ok || seq != want {
			return nil, &CorruptError{Session: id, Part: "message", Seq: want, Err: errors.New("missing from the store")}
		}
		msgs = append(msgs, kernel.Message{Seq: seq})
		err := item.Value(func(v []byte) error { return decodeMessage(v, &msgs[len(msgs)-1]) })
		if err != nil {
			return nil, &CorruptError{Session: id, Part: "message", Seq: seq, Err: err}
		}
	}
	if n := uint64(len(msgs)); n < last {
		return nil, &CorruptError{Session: id, Part: "message", Seq: n + 1, Err: fmt.Errorf("missing from the store (the metadata says %d messages)", last)}
	}
	return msgs, nil
}

// Commit stores step as one synced Badger transaction (see kernel.Store).
// A step larger than one transaction allows is written in several, its
// messages first and the metadata last: messages past the stored LastSeq
// are invisible, so the step still appears all at once.
func (s *Store) Commit(ctx context.Context, id string, step kernel.Step) error {
	if err := checkID(id); err != nil {
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

// List returns the metadata of every session, most recently updated
// first. Sessions past the TTL are left out. A session whose metadata
// cannot be decoded is listed with its id, StatusFailed, a title saying it
// is corrupt and the error under LabelCorrupt, so one damaged session
// neither hides the others nor disappears.
func (s *Store) List(ctx context.Context) ([]kernel.SessionMeta, error) {
	var out []kernel.SessionMeta
	err := s.scan(ctx, func(e scanEntry) error {
		switch {
		case e.orphan:
		case e.err != nil:
			out = append(out, kernel.SessionMeta{
				ID: e.id, Status: kernel.StatusFailed, Title: "(corrupt: " + e.err.Error() + ")",
				Labels: map[string]string{LabelCorrupt: e.err.Error()},
			})
		case !s.expired(&e.meta):
			out = append(out, e.meta)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
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
				e.err = it.Item().Value(func(v []byte) error {
					m, err := decodeMeta(v)
					e.meta = m
					return err
				})
				if e.err != nil {
					e.err = &CorruptError{Session: id, Part: "meta", Err: e.err}
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

// Delete removes session id: its metadata and pending approval in one
// synced transaction (the session is gone from then on), then its
// messages. A crash in between leaves invisible messages that GC removes.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return fmt.Errorf("delete session: %w: %w", err, kernel.ErrSessionNotFound)
	}
	if s.opts.ReadOnly {
		return fmt.Errorf("delete session %s: %w", id, ErrReadOnly)
	}
	mu := s.locks.of(id)
	mu.Lock()
	defer mu.Unlock()
	err := s.db.Update(func(txn *bdg.Txn) error {
		if _, err := txn.Get(metaKey(id)); errors.Is(err, bdg.ErrKeyNotFound) {
			return fmt.Errorf("session %q: %w", id, kernel.ErrSessionNotFound)
		} else if err != nil {
			return err
		}
		if err := txn.Delete(pendingKey(id)); err != nil {
			return err
		}
		return txn.Delete(metaKey(id))
	})
	if err == nil {
		err = s.deleteMessages(ctx, id, 1)
	}
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// deleteMessages deletes the message keys of id from seq from on. The
// caller holds the session's lock.
func (s *Store) deleteMessages(ctx context.Context, id string, from uint64) error {
	var keys [][]byte
	err := s.db.View(func(txn *bdg.Txn) error {
		p := msgPrefix(id)
		it := txn.NewIterator(bdg.IteratorOptions{Prefix: p})
		defer it.Close()
		for it.Seek(msgKey(id, from)); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if err != nil || len(keys) == 0 {
		return err
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for i, k := range keys {
		if i%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if err := wb.Delete(k); err != nil {
			return err
		}
	}
	return wb.Flush()
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

var (
	_ kernel.Store          = (*Store)(nil)
	_ kernel.SessionDeleter = (*Store)(nil)
)
