package badger

import bdg "github.com/dgraph-io/badger/v4"

// Bounding the table count. Sessions have disjoint key ranges, so the
// level-0 table a short CLI process flushes at Close overlaps nothing
// below it, and Badger moves it down as it is: every process left one more
// small table, and nothing ever merged them (Badger merges tables of one
// level only when they overlap a table coming from above). When a store
// holds more tables than its size needs, Close merges them (mergeTables):
// it writes marker keys at both ends of the key space, flushes the
// memtable (DropPrefix of a third marker), compacts (Flatten: the flushed
// table spans every other, so they are all merged into tables of the base
// size) and drops the end markers again, which rewrites only the first
// and the last table. That rewrites the store's tables once every
// tableSlack or so processes, not at every run.

// tableSlack is how many tables past what its size needs a store may hold.
const tableSlack = 16

var spanKeys = [][]byte{[]byte("a/span"), []byte("x/span")}

// tooManyTables reports whether the store holds more tables than
// tableSlack plus twice what its bytes need at the base table size.
func (s *Store) tooManyTables(baseTable int64) bool {
	tables := s.db.Tables()
	var size int64
	for _, t := range tables {
		size += int64(t.OnDiskSize)
	}
	return len(tables) > tableSlack+int(2*size/max(baseTable, 1))
}

// mergeTables merges the store's tables (see above). Writes are blocked
// meanwhile: Close calls it.
func (s *Store) mergeTables() error {
	err := s.db.Update(func(txn *bdg.Txn) error {
		for _, k := range append(spanKeys, reclaimMarker) {
			if err := txn.Set(k, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := s.db.DropPrefix(reclaimMarker); err != nil {
		return err
	}
	if err := s.db.Flatten(2); err != nil {
		return err
	}
	return s.db.DropPrefix(spanKeys...)
}
