// Package badger is a kernel.Store on an embedded Badger database
// (dgraph-io/badger/v4): write-through, crash-safe session persistence for
// the kernel CLI and server.
//
// Every Commit is one Badger transaction holding all the step's messages,
// the session's metadata and its pending approval, written with
// SyncWrites: when Commit returns, the step survives kill -9 and power
// loss, and a step is never half written. Steps of other sessions
// committed at the same moment share the transaction, and its sync (group
// commit, commit.go). A store directory has one writer
// at a time: a second read-write Open fails with ErrLocked, and a
// read-only Open reads a snapshot.
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
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	bdg "github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/internal/rules"
)

// Errors callers branch on with errors.Is.
var (
	// ErrLocked is returned by a read-write Open of a directory that
	// another process (or another Store of this process) holds.
	ErrLocked = errors.New("store is locked")
	// ErrReadOnly is returned by writes to a store opened with
	// Options.ReadOnly.
	ErrReadOnly = errors.New("store is read-only")
	// ErrDiskFull is returned by a write that would leave the file system
	// with less free space than Options.MinFreeBytes. Nothing was written.
	ErrDiskFull = errors.New("not enough free disk space")
)

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
	snapshot string   // the private copy a read-only Store reads, if any
	snapLock *os.File // held while the snapshot is in use
	remote   *remote  // the writer a read-only Store asks, if any
	srv      *server  // the reader socket of a read-write Store
	beside   besideState
	db       *bdg.DB
	opts     Options
	reserve  int64
	// baseTable is the tuning's table size (for tooManyTables).
	baseTable int64
	locks     locks
	events    eventLast
	group     group // the steps waiting for a shared transaction (commit.go)

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
		// holds or a crashed writer left: ask the writer, or read a copy.
		if h := probeLock(dir); h == heldByWriter || h == heldByNobody && unclean(dir) {
			return openBeside(dir, opts, t)
		}
	} else if err := prepareDir(dir, opts.Logger); err != nil {
		return nil, err
	} else if removed, err := removeEmptyLogs(dir); err != nil {
		return nil, fmt.Errorf("open session store %s: %w", dir, err)
	} else if len(removed) > 0 {
		opts.Logger.Warn("removed empty log files a crash left behind", "dir", dir, "files", removed)
	}
	if !opts.ReadOnly {
		if err := guardNewestLog(dir, opts.Logger); err != nil {
			return nil, err
		}
	}
	db, err := bdg.Open(opts.badgerOptions(dir, t))
	// A writer waits for readers of a free store (short-lived commands
	// such as `kernel sessions ls`, which let go before they print) to
	// finish, and, for a moment, for a lock this very process holds: a
	// Store it has just closed can stay locked until the children it
	// forked meanwhile have exec'd (selfWait).
	for start := time.Now(); err != nil && !opts.ReadOnly && time.Now().Before(start.Add(lockWait(dir))); {
		if onLockWait != nil {
			onLockWait()
		}
		time.Sleep(20 * time.Millisecond)
		db, err = bdg.Open(opts.badgerOptions(dir, t))
	}
	if err != nil {
		h := probeLock(dir)
		switch {
		case opts.ReadOnly && (h == heldByWriter || h == heldByNobody && unclean(dir)):
			return openBeside(dir, opts, t)
		case h != heldByNobody:
			return nil, lockedError(dir, h)
		}
		return nil, fmt.Errorf("open session store %s: %w", dir, err)
	}
	if !opts.ReadOnly {
		removeStaleSnapshots(dir)
		fixFileModes(dir, opts.Logger)
	}
	s := &Store{dir: dir, db: db, opts: opts, reserve: opts.MinFreeBytes, baseTable: t.baseTable, stop: make(chan struct{})}
	if s.reserve == 0 {
		s.reserve = t.reserve()
	}
	if !opts.ReadOnly {
		s.serve()
		s.wg.Add(1)
		go s.gcLoop()
	}
	return s, nil
}

// readerWait is how long a writer's Open waits for the readers of a free
// store to let go of it.
var readerWait = 10 * time.Second

// selfWait is how long a writer's Open waits for a lock held by its own
// process. Badger's lock is a flock on the directory, which belongs to
// the open file, not to the descriptor: a child forked while the Store
// was open (a sandbox launcher, a plugin, by any goroutine) holds a copy
// of the descriptor until its exec closes it, and when Close runs in that
// window the lock outlives it. A process that opens the store again right
// away (a second `kernel run` in one process, a test) found it "held by
// another kernel" with its own pid. The window is a fork's (the launcher's
// waits for its user namespace's maps): milliseconds. A second Store
// opened while the first is open still fails, after selfWait.
var selfWait = 2 * time.Second

// onLockWait, when set (tests), is called each time Open waits for a lock.
var onLockWait func()

// lockWait is how long Open may keep trying on dir as its lock stands now:
// readerWait while readers hold it, selfWait while this process alone
// does, else not at all.
func lockWait(dir string) time.Duration {
	switch probeLock(dir) {
	case heldByReaders:
		return readerWait
	case heldByWriter:
		if heldBySelf(dir) {
			return selfWait
		}
	}
	return 0
}

// openBeside opens a read-only Store on a store it cannot lock: through
// the writer's reader socket when a writer answers on it, or else on a
// snapshot copy.
func openBeside(dir string, opts Options, t tuning) (*Store, error) {
	if probeLock(dir) == heldByWriter && !noSocket {
		if r, ok := dialRemote(dir); ok {
			opts.ReadOnly = true
			return &Store{dir: dir, remote: r, opts: opts, reserve: -1, stop: make(chan struct{})}, nil
		}
	}
	return openSnapshot(dir, opts, t)
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Close stops the background goroutine, runs value-log GC once and closes
// the database. Calling it again returns the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.wg.Wait()
		if s.remote != nil {
			s.closeErr = s.closeBeside()
			return
		}
		s.stopServing()
		if !s.opts.ReadOnly {
			s.gcMu.Lock()
			s.valueLogGC()
			if s.tooManyTables(s.baseTable) {
				if err := s.mergeTables(); err != nil {
					s.opts.Logger.Warn("cannot merge the store's tables", "dir", s.dir, "error", err)
				}
			}
			s.gcMu.Unlock()
		}
		if err := s.db.Close(); err != nil && s.snapshot == "" {
			s.closeErr = fmt.Errorf("close session store %s: %w", s.dir, err)
		}
		if !s.opts.ReadOnly {
			fixFileModes(s.dir, s.opts.Logger)
		}
		if s.snapshot != "" {
			if err := os.RemoveAll(s.snapshot); err != nil {
				s.closeErr = fmt.Errorf("close session store %s: remove snapshot: %w", s.dir, err)
			}
			if s.snapLock != nil {
				_ = s.snapLock.Close()
			}
		}
	})
	return s.closeErr
}

// Delete removes session id: its metadata and pending approval in one
// synced transaction (the session is gone from then on), then its
// messages. A crash in between leaves invisible messages that GC removes.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := rules.CheckID(id); err != nil {
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
	if err == nil {
		err = s.deleteEvents(ctx, id)
	}
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// deleteMessages deletes the message keys of id from seq from on. The
// caller holds the session's lock.
func (s *Store) deleteMessages(ctx context.Context, id string, from uint64) error {
	return s.deletePrefix(ctx, msgPrefix(id), msgKey(id, from))
}

// deletePrefix deletes the keys with prefix p from seek on.
func (s *Store) deletePrefix(ctx context.Context, p, seek []byte) error {
	var keys [][]byte
	err := s.db.View(func(txn *bdg.Txn) error {
		it := txn.NewIterator(bdg.IteratorOptions{Prefix: p})
		defer it.Close()
		for it.Seek(seek); it.Valid(); it.Next() {
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

// The Store and the optional capabilities (kernel/store.go) badger has.
var (
	_ kernel.Store            = (*Store)(nil)
	_ kernel.SessionDeleter   = (*Store)(nil)
	_ kernel.SessionExporter  = (*Store)(nil)
	_ kernel.SessionImporter  = (*Store)(nil)
	_ kernel.SessionCollector = (*Store)(nil)
	_ kernel.StoreChecker     = (*Store)(nil)
	_ kernel.SpaceChecker     = (*Store)(nil)
	_ kernel.SpaceReclaimer   = (*Store)(nil)
)
