package badger

import (
	"context"
	"errors"
	"fmt"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/agentkernel/agentkernel/kernel"
)

// Disk comes back. Deleting a session writes tombstones; Badger frees the
// space only when compaction has carried the tombstones down to the last
// level (dropping the values they hide) and value-log GC has rewritten
// the value-log files those values were in. Neither happens soon on its
// own in a store used by short CLI processes, so `sessions rm` and
// `sessions gc` call Reclaim, which forces both:
//
//  1. DropPrefix on a marker key this function writes: Badger's way to
//     flush the memtables (with the tombstones in them) into tables. It
//     blocks writes for its duration, so the server's background sweep
//     does not call Reclaim;
//  2. Flatten: compacts every level into one, dropping deleted keys and
//     recording, per value-log file, how many bytes are now garbage;
//  3. value-log GC until no file has more than reclaimRatio garbage.
//
// Reclaim returns the store's size (bytes allocated on disk, so the
// preallocated holes of logs do not count) before and after.
const reclaimRatio = 0.2

// reclaimMarker is the key step 1 writes and drops; it sorts outside the
// sessions' "s/" keys.
var reclaimMarker = []byte("x/reclaim")

// Reclaim compacts the store and collects its value log so that the space
// of deleted sessions comes back (see above). Writes wait (or fail with
// Badger's ErrBlockedWrites) while it flushes.
func (s *Store) Reclaim(ctx context.Context) (kernel.ReclaimResult, error) {
	r := kernel.ReclaimResult{Where: s.dir}
	if s.opts.ReadOnly {
		return r, fmt.Errorf("reclaim space: %w", ErrReadOnly)
	}
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	r.Before, r.FilesBefore = StoreSize(s.dir)
	if err := s.db.Update(func(txn *bdg.Txn) error { return txn.Set(reclaimMarker, nil) }); err != nil {
		return r, fmt.Errorf("reclaim space: %w", err)
	}
	if err := s.db.DropPrefix(reclaimMarker); err != nil {
		return r, fmt.Errorf("reclaim space: flush: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	if err := s.db.Flatten(2); err != nil {
		return r, fmt.Errorf("reclaim space: compact: %w", err)
	}
	for range 10000 {
		if ctx.Err() != nil {
			break
		}
		err := s.db.RunValueLogGC(reclaimRatio)
		if err != nil {
			if !errors.Is(err, bdg.ErrNoRewrite) && !errors.Is(err, bdg.ErrRejected) {
				return r, fmt.Errorf("reclaim space: value log: %w", err)
			}
			break
		}
		r.Rewritten++
	}
	r.After, r.FilesAfter = StoreSize(s.dir)
	return r, ctx.Err()
}
