package badger

import (
	"fmt"
	"os"
	"strings"

	bdg "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/hashicorp/go-hclog"
)

// Sizes of the two tunings. A CLI process opens the store, runs one prompt
// and exits, so it wants a fast open and little memory; a server keeps the
// store open for days and wants throughput and cache.
type tuning struct {
	memTable   int64 // also bounds one transaction: Badger allows 15% of it
	memTables  int
	l0Tables   int
	l0Stall    int
	baseTable  int64
	baseLevel  int64
	blockCache int64
	compactors int
	// valueThreshold: values of this size or more go to the value log.
	// The CLI's is Badger's maximum (1 MiB): every process writes to a
	// value-log file of its own, so smaller thresholds left one more
	// file per process that wrote a large value, which only GC of
	// garbage ever removed; in tables, compaction bounds them.
	valueThreshold int64
	vlogFile       int64
	compression    options.CompressionType
}

var (
	cliTuning = tuning{
		memTable: 8 << 20, memTables: 2, l0Tables: 4, l0Stall: 12,
		baseTable: 2 << 20, baseLevel: 8 << 20, blockCache: 4 << 20, compactors: 2,
		valueThreshold: 1 << 20, vlogFile: 64 << 20, compression: options.None,
	}
	serverTuning = tuning{
		memTable: 64 << 20, memTables: 5, l0Tables: 5, l0Stall: 15,
		baseTable: 8 << 20, baseLevel: 64 << 20, blockCache: 256 << 20, compactors: 4,
		valueThreshold: 64 << 10, vlogFile: 1<<30 - 1, compression: options.Snappy,
	}
)

// badgerOptions returns the Badger options for dir.
func (o *Options) badgerOptions(dir string, t tuning) bdg.Options {
	b := bdg.DefaultOptions(dir).
		WithSyncWrites(true).
		WithReadOnly(o.ReadOnly).
		WithLogger(hclogAdapter{o.Logger}).
		WithMetricsEnabled(false).
		WithNumVersionsToKeep(1).
		// A damaged value fails its read (and only its message) instead
		// of reaching the codec as other bytes.
		WithVerifyValueChecksum(true).
		// Every writer of a session holds its lock (see locks), so Badger's
		// optimistic conflict detection would only cost memory.
		WithDetectConflicts(false).
		WithCompression(t.compression).
		WithMemTableSize(t.memTable).
		WithNumMemtables(t.memTables).
		WithNumLevelZeroTables(t.l0Tables).
		WithNumLevelZeroTablesStall(t.l0Stall).
		WithBaseTableSize(t.baseTable).
		WithBaseLevelSize(t.baseLevel).
		WithBlockCacheSize(t.blockCache).
		WithIndexCacheSize(0).
		WithNumCompactors(t.compactors).
		WithValueThreshold(t.valueThreshold).
		WithValueLogFileSize(t.vlogFile).
		// A CLI process is too short for background compaction: without
		// this every process left one more level-0 table behind.
		WithCompactL0OnClose(true).
		WithNumGoroutines(2)
	if o.Tune != nil {
		b = o.Tune(b)
	}
	// Badger refuses a threshold above the largest batch (15% of the
	// memtable), which a Tune with a smaller memtable can cause.
	if maxBatch := b.MemTableSize * 15 / 100; b.ValueThreshold > maxBatch {
		b = b.WithValueThreshold(maxBatch)
	}
	return b
}

// reserve is the free space a commit requires by default: room for a new
// memtable WAL file, the table it flushes to, and compaction.
func (t tuning) reserve() int64 { return 4*t.memTable + 16<<20 }

// defaultLogger is hclog at warn level on stderr.
func defaultLogger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "store", Level: hclog.Warn, Output: os.Stderr})
}

// hclogAdapter is a bdg.Logger writing to an hclog.Logger.
type hclogAdapter struct{ l hclog.Logger }

func (a hclogAdapter) Errorf(f string, v ...any)   { a.log(hclog.Error, f, v) }
func (a hclogAdapter) Warningf(f string, v ...any) { a.log(hclog.Warn, f, v) }
func (a hclogAdapter) Infof(f string, v ...any)    { a.log(hclog.Info, f, v) }
func (a hclogAdapter) Debugf(f string, v ...any)   { a.log(hclog.Debug, f, v) }

func (a hclogAdapter) log(level hclog.Level, f string, v []any) {
	if level > hclog.Debug && quietBadgerLine(f, v) {
		level = hclog.Debug
	}
	if l := a.l.GetLevel(); l == hclog.Off || level < l { // skip formatting Badger's chatty lines
		return
	}
	a.l.Log(level, strings.TrimRight(fmt.Sprintf(f, v...), "\n"))
}

// quietBadgerLine reports whether a warning or error Badger logs is one
// the store reports itself, in words a user understands, or one that is
// not a problem: those are logged at debug level only.
//   - "Unable to read: Key: [...]" and the "Key: [...] valuePointer"
//     lines after it: a value-log entry failing its checksum, which the
//     read then reports as errValueLog (fsck, the message's placeholder);
//   - "Unable to fill tables": a compaction (Flatten, as `sessions gc`
//     reclaims space) that found nothing to merge at one level, which
//     Badger itself does not report at Close ("should not report it to
//     the end user to avoid confusing them", db.go).
func quietBadgerLine(f string, v []any) bool {
	switch {
	case strings.HasPrefix(f, "Unable to read: Key:"), strings.HasPrefix(f, "Key: %v, Version"):
		return true
	case strings.Contains(f, "doCompact"):
		for _, x := range v {
			if err, ok := x.(error); ok && strings.Contains(err.Error(), "Unable to fill tables") {
				return true
			}
		}
	}
	return false
}

var _ bdg.Logger = hclogAdapter{}
