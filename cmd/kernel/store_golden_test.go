package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	bdg "github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/badger"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/NAME, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	testutil.Golden(t, filepath.Join("testdata", name), got, *update)
}

// storeT0 is when the golden stores' sessions were last updated.
var storeT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// smallTables makes a store whose tables and value-log files are small,
// so a few hundred kilobytes of sessions spread over several levels and
// value logs, as a large store's do: values of 1 KiB or more go to the
// value log.
func smallTables(o bdg.Options) bdg.Options {
	return o.WithValueThreshold(1 << 10).WithValueLogFileSize(1 << 20).
		WithMemTableSize(256 << 10).WithBaseTableSize(64 << 10).WithBaseLevelSize(256 << 10).
		WithNumLevelZeroTables(2).WithNumLevelZeroTablesStall(4)
}

// fillStore writes sessions to a new store in dir with the badger
// package directly (the CLI's own writes keep values under 1 MiB inline,
// so no CLI run puts one in the value log): each session id gets n
// messages of size bytes, each holding the marker "MSG-<id>-<seq>-".
func fillStore(t *testing.T, dir string, sessions map[string][2]int) {
	t.Helper()
	s, err := badger.Open(dir, badger.Options{Tune: smallTables, Logger: hclog.NewNullLogger(), Now: func() time.Time { return storeT0 }})
	if err != nil {
		t.Fatal(err)
	}
	for id, spec := range sessions {
		n, size := spec[0], spec[1]
		for i := 1; i <= n; i++ {
			role := kernel.RoleUser
			if i%2 == 0 {
				role = kernel.RoleAssistant
			}
			body := fmt.Sprintf("MSG-%s-%d-", id, i) + strings.Repeat(string(rune('a'+i%26)), size)
			step := kernel.Step{
				Messages: []kernel.Message{{Seq: uint64(i), Role: role, Content: body, Time: storeT0}},
				Meta:     kernel.SessionMeta{Title: id, Status: kernel.StatusIdle, Created: storeT0, Updated: storeT0},
			}
			if err := s.Commit(context.Background(), id, step); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// flipMarker flips eight bytes of every stored copy of marker's message in
// the store's files with suffix (".sst" or ".vlog"), 40 bytes past the
// marker, and fails unless it found one.
func flipMarker(t *testing.T, dir, suffix, marker string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*"+suffix))
	found := false
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		changed := false
		for off := 0; ; {
			i := bytes.Index(b[off:], []byte(marker))
			if i < 0 {
				break
			}
			at := off + i + len(marker) + 40
			for k := range 8 {
				b[at+k] ^= 0xff
			}
			changed, off = true, at+8
		}
		if changed {
			found = true
			if err := os.WriteFile(f, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !found {
		t.Fatalf("%s is in no %s file of %s", marker, suffix, dir)
	}
}

// TestFsckWordingGolden: what `sessions fsck` says about eight bytes
// flipped in a value kept in a table (a small message) and in the value
// log (a large one, in a value log older than the newest, which Badger
// reads without complaint until the value is asked for). Each is named
// for what happened to it, never as a "truncated (0 bytes)" value, and
// no raw Badger log line ("[ERROR] Key: [...]") reaches the output.
func TestFsckWordingGolden(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	fillStore(t, dir, map[string][2]int{
		"intact":   {3, 100},
		"table":    {3, 100},
		"valuelog": {12, 200 << 10},
	})
	flipMarker(t, dir, ".sst", "MSG-table-2-")
	flipMarker(t, dir, ".vlog", "MSG-valuelog-2-")
	out, errOut, err := cli(t, "sessions", "fsck", "--store", dir)
	if err == nil {
		t.Fatalf("fsck of a damaged store succeeded:\n%s%s", out, errOut)
	}
	_, msg := exitStatus(err)
	got := strings.ReplaceAll("stdout:\n"+out+"stderr:\n"+errOut+"kernel: "+msg+"\n", dir, "STORE")
	golden(t, "fsck/damaged.golden", got)

	// A reader found it too: `sessions ls` says so.
	out, _, err = cli(t, "sessions", "ls", "--store", dir)
	if err != nil || strings.Count(out, "DAMAGED") != 2 {
		t.Fatalf("sessions ls after fsck, want two DAMAGED sessions: %v\n%s", err, out)
	}
}

// TestGCQuietGolden: `sessions gc` of a store spread over several levels
// says what it removed and the space it gave back, and nothing else: no
// Badger warning ("Unable to fill tables" from a compaction that had
// nothing to merge at one level).
func TestGCQuietGolden(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	dir := filepath.Join(t.TempDir(), "store")
	sessions := map[string][2]int{}
	for i := range 40 {
		sessions[fmt.Sprintf("s%02d", i)] = [2]int{40, 700}
	}
	fillStore(t, dir, sessions)
	out, errOut, err := cli(t, "sessions", "gc", "--older-than", "1d", "--store", dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	// The sizes depend on the file system's allocation: only their shape
	// is golden.
	errOut = sizeLine.ReplaceAllString(strings.ReplaceAll(errOut, dir, "STORE"), "$1 SIZE in N files -> SIZE in N files")
	golden(t, "gc/quiet.golden", "stdout:\n"+out+"stderr:\n"+errOut)
}

// sizeLine matches the line reclaimSpace prints.
var sizeLine = regexp.MustCompile(`(?m)^(store STORE:) .* -> .*$`)

// TestReaderRecordsDamage: damage that a reader finds (`sessions show`,
// which opens the store read-only) is recorded where `sessions ls` shows
// it, without waiting for a writer or fsck to load the session.
func TestReaderRecordsDamage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	fillStore(t, dir, map[string][2]int{"intact": {3, 100}, "table": {3, 100}})
	flipMarker(t, dir, ".sst", "MSG-table-2-")
	ls := func() string {
		t.Helper()
		out, errOut, err := cli(t, "sessions", "ls", "--store", dir)
		if err != nil {
			t.Fatalf("sessions ls: %v\n%s", err, errOut)
		}
		return out
	}
	if out := ls(); strings.Contains(out, "DAMAGED") {
		t.Fatalf("flagged before anything read the session:\n%s", out)
	}
	out, errOut, err := cli(t, "sessions", "show", "table", "--store", dir)
	if err != nil || !strings.Contains(out, "message 2 of this session could not be read") {
		t.Fatalf("sessions show of the damaged session: %v\n%s%s", err, out, errOut)
	}
	out = ls()
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "table ") != strings.Contains(line, "DAMAGED") {
			t.Errorf("after sessions show, sessions ls flags the wrong sessions:\n%s", out)
		}
	}
}
