package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	bdg "github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
)

// openTest opens a store in a fresh directory, closed at the end of t.
func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	return openAt(t, t.TempDir(), opts)
}

func openAt(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func quietLogger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "store", Level: hclog.Warn, Output: os.Stderr})
}

func TestConformance(t *testing.T) {
	kerneltest.TestStore(t, func(t *testing.T) kernel.Store { return openTest(t, Options{}) })
}

func TestEventLogConformance(t *testing.T) {
	kerneltest.TestEventLog(t, func(t *testing.T) kernel.Store { return openTest(t, Options{}) })
}

func TestStepEventCommitterConformance(t *testing.T) {
	kerneltest.TestStepEventCommitter(t, func(t *testing.T) kernel.Store { return openTest(t, Options{}) })
}

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// commitN stores a session of n user messages in one step.
func commitN(t testing.TB, s *Store, id string, n int, meta kernel.SessionMeta) []kernel.Message {
	t.Helper()
	msgs := make([]kernel.Message, n)
	for i := range msgs {
		msgs[i] = kernel.Message{Seq: uint64(i + 1), Role: kernel.RoleUser, Content: fmt.Sprintf("%s message %d", id, i+1), Time: t0}
	}
	if err := s.Commit(context.Background(), id, kernel.Step{Messages: msgs, Meta: meta}); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// put writes a raw value, as a damaged disk or an interrupted write would
// leave it.
func put(t *testing.T, s *Store, key, val []byte) {
	t.Helper()
	if err := s.db.Update(func(txn *bdg.Txn) error { return txn.Set(key, val) }); err != nil {
		t.Fatal(err)
	}
}

func drop(t *testing.T, s *Store, key []byte) {
	t.Helper()
	if err := s.db.Update(func(txn *bdg.Txn) error { return txn.Delete(key) }); err != nil {
		t.Fatal(err)
	}
}

func exists(t *testing.T, s *Store, key []byte) bool {
	t.Helper()
	var ok bool
	err := s.db.View(func(txn *bdg.Txn) error {
		_, err := txn.Get(key)
		ok = err == nil
		if errors.Is(err, bdg.ErrKeyNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestCorruptValues damages one part of one session at a time: a damaged
// message value becomes a placeholder (the session still loads, labelled,
// and List flags it); any other damage is an error naming the session and
// the part; the other sessions still load and list.
func TestCorruptValues(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, s *Store)
		want   string
		listed bool   // List marks the session corrupt
		lost   uint64 // the message that becomes a placeholder
	}{
		{"message bit flip", func(t *testing.T, s *Store) {
			v := encodeMessage(nil, &kernel.Message{Role: kernel.RoleUser, Content: "x"})
			v[3] ^= 1
			put(t, s, msgKey("victim", 2), v)
		}, "message 2: damaged on disk: the value's bytes changed", false, 2},
		{"message truncated", func(t *testing.T, s *Store) {
			v := encodeMessage(nil, &kernel.Message{Role: kernel.RoleUser, Content: "some content"})
			put(t, s, msgKey("victim", 3), v[:7])
		}, "message 3: damaged on disk: the value's bytes changed", false, 3},
		{"message missing", func(t *testing.T, s *Store) { drop(t, s, msgKey("victim", 2)) },
			"session victim: message 2: corrupt session data: missing from the store", false, 0},
		{"last message missing", func(t *testing.T, s *Store) { drop(t, s, msgKey("victim", 3)) },
			"session victim: message 3: corrupt session data: missing from the store (the metadata says 3 messages)", false, 0},
		{"meta", func(t *testing.T, s *Store) { put(t, s, metaKey("victim"), []byte("{garbage")) },
			"session victim: meta: corrupt session data", true, 0},
		{"meta from the future", func(t *testing.T, s *Store) { put(t, s, metaKey("victim"), seal([]byte{7, '{', '}'}, 0)) },
			"session victim: meta: corrupt session data: unknown encoding version 7", true, 0},
		{"pending", func(t *testing.T, s *Store) { put(t, s, pendingKey("victim"), seal([]byte{1, '['}, 0)) },
			"session victim: pending: corrupt session data", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, Options{})
			commitN(t, s, "before", 2, kernel.SessionMeta{Updated: t0})
			commitN(t, s, "victim", 3, kernel.SessionMeta{Updated: t0.Add(time.Minute)})
			commitN(t, s, "after", 2, kernel.SessionMeta{Updated: t0.Add(2 * time.Minute)})
			tc.damage(t, s)

			se, err := s.Load(ctx, "victim")
			if tc.lost != 0 {
				if err != nil {
					t.Fatalf("Load(victim) with a damaged message = %v, want the session with a placeholder", err)
				}
				m := se.Messages[tc.lost-1]
				if len(se.Messages) != 3 || m.Seq != tc.lost || !strings.Contains(m.Content, fmt.Sprintf("message %d of this session could not be read", tc.lost)) {
					t.Fatalf("damaged message %d loaded as %+v", tc.lost, m)
				}
				if got := se.Meta.Labels[LabelDamaged]; !strings.Contains(got, tc.want) {
					t.Fatalf("Load's damage label %q, want it to contain %q", got, tc.want)
				}
			}
			var ce *kernel.CorruptError
			if tc.lost != 0 {
			} else if !errors.As(err, &ce) || !errors.Is(err, kernel.ErrCorrupt) || ce.Session != "victim" || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load(victim) = %v, want a *kernel.CorruptError containing %q", err, tc.want)
			}
			for _, id := range []string{"before", "after"} {
				if se, err := s.Load(ctx, id); err != nil || len(se.Messages) != 2 {
					t.Fatalf("Load(%s) next to a damaged session: %v", id, err)
				}
			}
			list, err := s.List(ctx)
			if err != nil {
				t.Fatalf("List with a damaged session: %v", err)
			}
			var ids []string
			for _, m := range list {
				ids = append(ids, m.ID)
				if m.ID == "victim" && (m.Labels[kernel.LabelCorrupt] != "") != tc.listed {
					t.Errorf("victim's labels %v; marked corrupt should be %t", m.Labels, tc.listed)
				}
				if m.ID == "victim" && (m.Labels[LabelDamaged] != "") != (tc.lost != 0) {
					t.Errorf("victim's labels %v; flagged damaged should be %t", m.Labels, tc.lost != 0)
				}
			}
			want := []string{"after", "victim", "before"}
			if tc.listed {
				want = []string{"after", "before", "victim"} // no known update time: last
			}
			if !reflect.DeepEqual(ids, want) {
				t.Fatalf("List = %v, want %v", ids, want)
			}
			if err := s.Commit(ctx, "victim", kernel.Step{Messages: []kernel.Message{{Seq: 4, Role: kernel.RoleUser}}}); tc.listed && !errors.Is(err, kernel.ErrCorrupt) {
				t.Errorf("Commit on a corrupt meta = %v, want kernel.ErrCorrupt", err)
			}
			if err := s.Delete(ctx, "victim"); err != nil {
				t.Fatalf("Delete(victim): %v", err)
			}
			if _, err := s.Load(ctx, "victim"); !errors.Is(err, kernel.ErrSessionNotFound) {
				t.Fatalf("Load after Delete: %v", err)
			}
		})
	}
}

// TestCorruptOnDisk flips a byte of a message inside a table file on disk:
// the next process loads the session with a placeholder naming the
// message, and every other session is intact.
func TestCorruptOnDisk(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		id := fmt.Sprintf("s%d", i)
		msgs := []kernel.Message{
			{Seq: 1, Role: kernel.RoleUser, Content: "hello", Time: t0},
			{Seq: 2, Role: kernel.RoleAssistant, Content: fmt.Sprintf("MARKER-%d-%s", i, strings.Repeat("x", 100)), Time: t0},
		}
		if err := s.Commit(ctx, id, kernel.Step{Messages: msgs, Meta: kernel.SessionMeta{Updated: t0}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil { // flushes the memtable into a table
		t.Fatal(err)
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	flipped := false
	for _, f := range tables {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, []byte("MARKER-3-")); i >= 0 {
			b[i+len("MARKER-3-")+10] ^= 0x01
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Fatal(err)
			}
			flipped = true
		}
	}
	if !flipped {
		t.Fatalf("no table holds the marker (tables: %v)", tables)
	}
	s = openAt(t, dir, Options{})
	se, err := s.Load(ctx, "s3")
	if err != nil || len(se.Messages) != 2 || !strings.Contains(se.Messages[1].Content, "message 2 of this session could not be read") ||
		!strings.Contains(se.Meta.Labels[LabelDamaged], "message 2") {
		t.Fatalf("Load(s3) = %v, want the session with message 2 a placeholder", err)
	}
	for _, id := range []string{"s0", "s1", "s2", "s4"} {
		if _, err := s.Load(ctx, id); err != nil {
			t.Errorf("Load(%s): %v", id, err)
		}
	}
	if l, err := s.List(ctx); err != nil || len(l) != 5 {
		t.Fatalf("List: %d sessions, %v", len(l), err)
	}
}

// TestLargeStep commits a step bigger than one Badger transaction (here
// 2.5 MiB of inline values against a 1.2 MiB limit): it is stored whole.
func TestLargeStep(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	commitN(t, s, "big", 1, kernel.SessionMeta{})
	round := make([]kernel.Message, 200)
	for i := range round {
		round[i] = kernel.Message{Seq: uint64(i + 2), Role: kernel.RoleTool, ToolCallID: fmt.Sprint(i), Content: strings.Repeat("y", 12<<10)}
	}
	if err := s.Commit(ctx, "big", kernel.Step{Messages: round, Meta: kernel.SessionMeta{Turns: 7}}); err != nil {
		t.Fatal(err)
	}
	se, err := s.Load(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if len(se.Messages) != 201 || se.Meta.LastSeq != 201 || se.Meta.Turns != 7 || se.Messages[200].Content != round[199].Content {
		t.Fatalf("got %d messages, meta %+v", len(se.Messages), se.Meta)
	}
	if err := s.Delete(ctx, "big"); err != nil {
		t.Fatalf("Delete of a session larger than a transaction: %v", err)
	}
	if exists(t, s, msgKey("big", 100)) {
		t.Fatal("Delete left messages behind")
	}
}

// TestUncommittedTail: messages past LastSeq (a large step interrupted
// before its commit point) are invisible, are overwritten by the next
// commit, and are removed by GC.
func TestUncommittedTail(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	commitN(t, s, "s", 3, kernel.SessionMeta{Updated: t0})
	stale := encodeMessage(nil, &kernel.Message{Role: kernel.RoleUser, Content: "never committed"})
	put(t, s, msgKey("s", 4), stale)
	put(t, s, msgKey("s", 5), stale)
	se, err := s.Load(ctx, "s")
	if err != nil || len(se.Messages) != 3 {
		t.Fatalf("Load with an uncommitted tail: %v, %d messages", err, len(se.Messages))
	}
	next := kernel.Message{Seq: 4, Role: kernel.RoleUser, Content: "committed"}
	if err := s.Commit(ctx, "s", kernel.Step{Messages: []kernel.Message{next}, Meta: kernel.SessionMeta{Updated: t0}}); err != nil {
		t.Fatal(err)
	}
	if se, err = s.Load(ctx, "s"); err != nil || len(se.Messages) != 4 || se.Messages[3].Content != "committed" {
		t.Fatalf("after the next commit: %v %+v", err, se.Messages)
	}
	if _, err := s.GC(ctx, 24*time.Hour*365*100); err != nil {
		t.Fatal(err)
	}
	if exists(t, s, msgKey("s", 5)) {
		t.Fatal("GC kept a message past LastSeq")
	}
	if !exists(t, s, msgKey("s", 4)) {
		t.Fatal("GC removed a committed message")
	}
}

// TestOrphans: message keys without metadata (an interrupted Delete or
// Import) are invisible and GC removes them.
func TestOrphans(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	commitN(t, s, "alive", 1, kernel.SessionMeta{Updated: time.Now()})
	put(t, s, msgKey("ghost", 1), encodeMessage(nil, &kernel.Message{Role: kernel.RoleUser}))
	put(t, s, pendingKey("ghost"), []byte("x"))
	if l, err := s.List(ctx); err != nil || len(l) != 1 || l[0].ID != "alive" {
		t.Fatalf("List = %+v, %v; want only alive", l, err)
	}
	if _, err := s.Load(ctx, "ghost"); !errors.Is(err, kernel.ErrSessionNotFound) {
		t.Fatalf("Load(ghost) = %v", err)
	}
	removed, err := s.GC(ctx, time.Hour)
	if err != nil || len(removed) != 0 {
		t.Fatalf("GC = %v, %v; want nothing reported", removed, err)
	}
	if exists(t, s, msgKey("ghost", 1)) || exists(t, s, pendingKey("ghost")) {
		t.Fatal("GC left the orphan's keys")
	}
}

func TestGC(t *testing.T) {
	ctx := context.Background()
	now := t0.Add(90 * 24 * time.Hour)
	s := openTest(t, Options{Now: func() time.Time { return now }})
	commitN(t, s, "old", 2, kernel.SessionMeta{Created: t0, Updated: t0})
	commitN(t, s, "old-created", 1, kernel.SessionMeta{Created: t0})
	commitN(t, s, "recent", 1, kernel.SessionMeta{Created: t0, Updated: now.Add(-24 * time.Hour)})
	commitN(t, s, "broken", 1, kernel.SessionMeta{Updated: t0})
	put(t, s, metaKey("broken"), []byte("?"))
	removed, err := s.GC(ctx, 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"old", "old-created"}; !reflect.DeepEqual(removed, want) {
		t.Fatalf("GC removed %v, want %v", removed, want)
	}
	l, err := s.List(ctx)
	if err != nil || len(l) != 2 {
		t.Fatalf("List after GC: %+v %v", l, err)
	}
	if exists(t, s, msgKey("old", 2)) {
		t.Fatal("GC left messages of a removed session")
	}
	if _, err := s.GC(ctx, 0); err == nil {
		t.Fatal("GC(0) succeeded")
	}
}

// TestTTL: expired sessions vanish from Load and List at once, and the
// background goroutine deletes them.
func TestTTL(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	setNow := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }
	for _, interval := range []time.Duration{-1, 5 * time.Millisecond} {
		t.Run(fmt.Sprint(interval), func(t *testing.T) {
			setNow(t0)
			s := openTest(t, Options{TTL: time.Hour, GCInterval: interval, Now: clock})
			commitN(t, s, "stale", 1, kernel.SessionMeta{Updated: t0.Add(-30 * time.Minute)})
			commitN(t, s, "fresh", 1, kernel.SessionMeta{Updated: t0})
			setNow(t0.Add(45 * time.Minute)) // stale is 75 minutes old, fresh 45
			if interval < 0 {
				if _, err := s.Load(ctx, "stale"); !errors.Is(err, kernel.ErrSessionNotFound) || !strings.Contains(err.Error(), "expired") {
					t.Fatalf("Load(stale) = %v, want expired / ErrSessionNotFound", err)
				}
				if l, _ := s.List(ctx); len(l) != 1 || l[0].ID != "fresh" {
					t.Fatalf("List = %+v, want only fresh", l)
				}
				if !exists(t, s, metaKey("stale")) {
					t.Fatal("without a schedule, nothing deletes the session before GC")
				}
			} else {
				deadline := time.Now().Add(10 * time.Second)
				for exists(t, s, metaKey("stale")) {
					if time.Now().After(deadline) {
						t.Fatal("the background sweep did not delete the expired session")
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			if _, err := s.Load(ctx, "fresh"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w := openAt(t, dir, Options{})
	commitN(t, w, "s", 2, kernel.SessionMeta{Updated: t0})
	// A writer holds the store: the reader gets a snapshot.
	snap, err := Open(dir, Options{ReadOnly: true, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("read-only Open while a writer holds the store: %v", err)
	}
	if snap.remote == nil {
		t.Fatal("a reader of a store a writer holds does not ask the writer")
	}
	commitN(t, w, "later", 1, kernel.SessionMeta{Updated: t0})
	if se, err := snap.Load(ctx, "s"); err != nil || len(se.Messages) != 2 {
		t.Fatalf("remote Load: %v", err)
	}
	if _, err := snap.Load(ctx, "later"); err != nil {
		t.Fatalf("the reader does not see a session committed after it opened: %v", err)
	}
	if _, err := snap.Load(ctx, "nope"); !errors.Is(err, kernel.ErrSessionNotFound) {
		t.Fatalf("remote Load of an unknown session = %v, want ErrSessionNotFound", err)
	}
	if err := snap.Commit(ctx, "s", kernel.Step{Messages: []kernel.Message{{Seq: 3, Role: kernel.RoleUser}}}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Commit on a snapshot = %v, want ErrReadOnly", err)
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, snapshotPrefix+"*")); len(left) != 0 {
		t.Fatalf("Close left the snapshot behind: %v", left)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r1 := openAt(t, dir, Options{ReadOnly: true})
	r2 := openAt(t, dir, Options{ReadOnly: true}) // readers share the lock
	for _, r := range []*Store{r1, r2} {
		if se, err := r.Load(ctx, "s"); err != nil || len(se.Messages) != 2 {
			t.Fatalf("read-only Load: %v", err)
		}
		if l, err := r.List(ctx); err != nil || len(l) != 2 {
			t.Fatalf("read-only List: %d sessions, %v", len(l), err)
		}
		var b bytes.Buffer
		if err := r.Export(ctx, "s", &b); err != nil {
			t.Fatalf("read-only Export: %v", err)
		}
	}
	for name, err := range map[string]error{
		"Commit": r1.Commit(ctx, "s", kernel.Step{Messages: []kernel.Message{{Seq: 3, Role: kernel.RoleUser}}}),
		"Delete": r1.Delete(ctx, "s"),
		"GC":     func() error { _, err := r1.GC(ctx, time.Hour); return err }(),
		"Import": func() error { _, err := r1.Import(ctx, strings.NewReader("")); return err }(),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s on a read-only store = %v, want ErrReadOnly", name, err)
		}
	}
	defer func(w time.Duration) { readerWait = w }(readerWait)
	readerWait = 2 * time.Second
	start := time.Now()
	if _, err := Open(dir, Options{Logger: quietLogger()}); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "reading it") {
		t.Fatalf("Open for writing while readers hold the store = %v, want ErrLocked (reading it)", err)
	}
	if waited := time.Since(start); waited < readerWait {
		t.Errorf("the writer gave up after %s, want it to wait %s for the readers", waited, readerWait)
	}
	if _, err := Open(filepath.Join(dir, "nope"), Options{ReadOnly: true}); err == nil {
		t.Fatal("read-only Open of a missing directory succeeded")
	}
}

// TestLockedInProcess: a second Store on the same directory, even in the
// same process, fails with ErrLocked naming the directory and the holder.
func TestLockedInProcess(t *testing.T) {
	dir := t.TempDir()
	openAt(t, dir, Options{})
	_, err := Open(dir, Options{Logger: quietLogger()})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	want := fmt.Sprintf("open session store %s: store is locked: another kernel (pid %d, %q) holds it", dir, os.Getpid(), commandOf(os.Getpid()))
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q\ndoes not contain %q", err, want)
	}
}

func TestBadIDs(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	for _, id := range []string{"", "a/b", "s/x", "with space", "ünï", strings.Repeat("x", 129), "a\x00"} {
		if err := s.Commit(ctx, id, kernel.Step{Messages: []kernel.Message{{Seq: 1, Role: kernel.RoleUser}}}); err == nil {
			t.Errorf("Commit(%q) succeeded", id)
		}
		if _, err := s.Load(ctx, id); !errors.Is(err, kernel.ErrSessionNotFound) {
			t.Errorf("Load(%q) = %v, want ErrSessionNotFound", id, err)
		}
	}
	for _, id := range []string{"a", "06h06p6rta3zzj1h", "A.b_c-9", strings.Repeat("x", 128)} {
		commitN(t, s, id, 1, kernel.SessionMeta{})
	}
}

// TestPrefixIDs: ids that are prefixes of each other stay apart.
func TestPrefixIDs(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	for i, id := range []string{"a", "a.", "a0", "ab", "a-"} {
		commitN(t, s, id, i+1, kernel.SessionMeta{Title: id})
	}
	for i, id := range []string{"a", "a.", "a0", "ab", "a-"} {
		se, err := s.Load(ctx, id)
		if err != nil || len(se.Messages) != i+1 || se.Meta.Title != id {
			t.Fatalf("Load(%s): %v, %d messages", id, err, len(se.Messages))
		}
	}
	if l, err := s.List(ctx); err != nil || len(l) != 5 {
		t.Fatalf("List: %d, %v", len(l), err)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.List(ctx); len(l) != 4 {
		t.Fatalf("Delete(a) removed %d sessions", 5-len(l))
	}
}

// TestHammer runs commits, loads, lists, deletes and GC at once (run with
// -race).
func TestHammer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 4 {
				id := fmt.Sprintf("w%d-%d", w, round)
				for i := 1; i <= 10; i++ {
					m := kernel.Message{Seq: uint64(i), Role: kernel.RoleUser, Content: id}
					if err := s.Commit(ctx, id, kernel.Step{Messages: []kernel.Message{m}, Meta: kernel.SessionMeta{Updated: time.Now()}}); err != nil {
						errs <- err
						return
					}
					if _, err := s.Load(ctx, id); err != nil {
						errs <- err
						return
					}
				}
				if round%2 == 0 {
					if err := s.Delete(ctx, id); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 10 {
			if _, err := s.List(ctx); err != nil {
				errs <- err
				return
			}
			if _, err := s.GC(ctx, time.Hour); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	l, err := s.List(ctx)
	if err != nil || len(l) != 8 { // rounds 1 and 3 of 4 workers
		t.Fatalf("List after the hammer: %d sessions, %v", len(l), err)
	}
}

func TestDefaultDir(t *testing.T) {
	for _, tc := range []struct{ name, xdg, home, want string }{
		{"xdg", "/data", "/home/u", "/data/agentkernel"},
		{"relative xdg ignored", "data", "/home/u", "/home/u/.local/share/agentkernel"},
		{"no xdg", "", "/home/u", "/home/u/.local/share/agentkernel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("XDG_DATA_HOME", tc.xdg)
			t.Setenv("HOME", tc.home)
			got, err := DefaultDir()
			if err != nil || got != tc.want {
				t.Fatalf("DefaultDir() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	t.Run("nothing", func(t *testing.T) {
		t.Setenv("XDG_DATA_HOME", "")
		t.Setenv("HOME", "")
		if _, err := DefaultDir(); err == nil || !strings.Contains(err.Error(), "--store") {
			t.Fatalf("DefaultDir() without HOME = %v", err)
		}
	})
}
