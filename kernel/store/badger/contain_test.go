//go:build unix

package badger

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/agentkernel/agentkernel/internal/privfile"
	"github.com/agentkernel/agentkernel/kernel"
)

// largeSession commits n messages of size bytes each (past the value
// threshold, so they live in the value log), each holding a marker.
func largeSession(t *testing.T, s *Store, id string, n, size int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		role := kernel.RoleUser
		if i%2 == 0 {
			role = kernel.RoleAssistant
		}
		body := fmt.Sprintf("MSG-%s-%03d-", id, i) + strings.Repeat(string(rune('a'+i%26)), size)
		err := s.Commit(t.Context(), id, kernel.Step{
			Messages: []kernel.Message{{Seq: uint64(i), Role: role, Content: body, Time: t0}},
			Meta:     kernel.SessionMeta{Updated: t0},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestDamagedValueLogKept is the truncation scenario: eight bytes
// flipped in the middle of the newest value log. The next read-write open
// keeps the file whole (Badger would cut it at the damage), keeps a copy
// in quarantine/, and the session loads with one placeholder and every
// other message; fsck names the message; fsck --repair stores the
// placeholder and the session goes on.
func TestDamagedValueLogKept(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openAt(t, dir, Options{Tune: vlogTune})
	largeSession(t, s, "big", 28, 20<<10)
	commitN(t, s, "small", 3, kernel.SessionMeta{Updated: t0})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	name, _, ok := newestVlog(dir)
	if !ok {
		t.Fatal("no value log")
	}
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("MSG-big-007-"))
	if i < 0 {
		t.Fatalf("message 7 is not in the newest value log %s (%d bytes)", name, len(b))
	}
	for k := range 8 {
		b[i+100+k] ^= 0xff
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	size := int64(len(b))

	s2, err := Open(dir, Options{Logger: quietLogger(), Tune: vlogTune})
	if err != nil {
		t.Fatalf("open after the damage: %v", err)
	}
	t.Cleanup(func() { s2.Close() })
	if fi, err := os.Stat(path); err != nil || fi.Size() != size {
		t.Fatalf("the damaged value log was not kept whole: %v, size %d, want %d", err, fi.Size(), size)
	}
	copies, _ := filepath.Glob(filepath.Join(dir, quarantineDir, name+".*"))
	if len(copies) != 1 {
		t.Fatalf("quarantine copies of %s: %v, want one", name, copies)
	}
	if c, err := os.ReadFile(copies[0]); err != nil || !bytes.Equal(c, b) {
		t.Fatalf("the quarantined copy differs from the damaged file: %v", err)
	}
	list, err := s2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list {
		if (m.Labels[LabelDamaged] != "") != (m.ID == "big") {
			t.Errorf("List: %s labels %v", m.ID, m.Labels)
		}
	}
	se, err := s2.Load(ctx, "big")
	if err != nil {
		t.Fatalf("Load of the damaged session: %v", err)
	}
	if len(se.Messages) != 28 {
		t.Fatalf("%d messages, want 28", len(se.Messages))
	}
	for _, m := range se.Messages {
		want := fmt.Sprintf("MSG-big-%03d-", m.Seq)
		if m.Seq == 7 {
			if !strings.Contains(m.Content, "message 7 of this session could not be read") {
				t.Fatalf("message 7 = %q, want the placeholder", m.Content)
			}
			continue
		}
		if !strings.HasPrefix(m.Content, want) {
			t.Fatalf("message %d lost: %.40q", m.Seq, m.Content)
		}
	}

	rep, err := s2.Fsck(ctx, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Damaged() != 1 || len(rep.Quarantined) != 1 {
		t.Fatalf("fsck: %d damaged sessions, quarantined %v; want 1 and the copy", rep.Damaged(), rep.Quarantined)
	}
	for _, f := range rep.Sessions {
		if f.ID == "big" && (len(f.Damaged) != 1 || f.Damaged[7] == "" || f.Messages != 28) {
			t.Fatalf("fsck of big: %+v", f)
		}
	}
	if _, err := s2.Fsck(ctx, nil, true); err != nil {
		t.Fatal(err)
	}
	rep, err = s2.Fsck(ctx, nil, false)
	if err != nil || rep.Damaged() != 0 {
		t.Fatalf("fsck after --repair: %d damaged, %v", rep.Damaged(), err)
	}
	if err := s2.Commit(ctx, "big", kernel.Step{Messages: []kernel.Message{{Seq: 29, Role: kernel.RoleUser, Content: "go on"}}, Meta: kernel.SessionMeta{Updated: t0}}); err != nil {
		t.Fatalf("continue the repaired session: %v", err)
	}
	se, err = s2.Load(ctx, "big")
	if err != nil || len(se.Messages) != 29 || se.Meta.Labels[LabelDamaged] != "" || !strings.Contains(se.Messages[6].Content, "could not be read") {
		t.Fatalf("after repair: %v", err)
	}
	if l, _ := s2.List(ctx); len(l) != 2 || l[0].Labels[LabelDamaged] != "" && l[1].Labels[LabelDamaged] != "" {
		t.Fatalf("List after repair still flags: %+v", l)
	}
}

// TestSnapshotLeaks injects a fault into each step of taking a snapshot:
// the failed attempts leave nothing behind, and a snapshot whose reader is
// gone is swept by the next writer at once.
func TestSnapshotLeaks(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, Options{Tune: vlogTune})
	largeSession(t, s, "big", 4, 20<<10)
	commitN(t, s, "small", 3, kernel.SessionMeta{Updated: t0})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	snapshots := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, snapshotPrefix+"*"))
		return m
	}
	steps := []string{"list", "mkdir", "lock", ".mem", "MANIFEST", "KEYREGISTRY", ".sst", ".vlog", "verify"}
	defer func() { copyFault = nil }()
	for _, step := range steps {
		copyFault = func(at string) error {
			if at == step {
				return fmt.Errorf("injected fault at %s", at)
			}
			return nil
		}
		_, _, err := copyStore(dir)
		if err == nil || !strings.Contains(err.Error(), "injected fault at "+step) {
			t.Fatalf("fault at %s: copyStore = %v", step, err)
		}
		if left := snapshots(); len(left) != 0 {
			t.Fatalf("a fault at step %s left %v", step, left)
		}
		if _, err := openSnapshot(dir, Options{Logger: quietLogger()}, cliTuning); err == nil {
			t.Fatalf("fault at %s: openSnapshot succeeded", step)
		}
		if left := snapshots(); len(left) != 0 {
			t.Fatalf("a fault at step %s left %v after the retries", step, left)
		}
	}
	copyFault = nil

	// A fault in Badger's open of the copy: a damaged MANIFEST.
	copyFault = func(at string) error {
		if at == "verify" {
			snaps := snapshots()
			if len(snaps) == 1 {
				_ = os.WriteFile(filepath.Join(snaps[0], "MANIFEST"), []byte("garbage"), 0o600)
			}
		}
		return nil
	}
	if _, err := openSnapshot(dir, Options{Logger: quietLogger()}, cliTuning); err == nil {
		t.Fatal("a snapshot with a garbage MANIFEST opened")
	}
	if left := snapshots(); len(left) != 0 {
		t.Fatalf("a failed open of the copy left %v", left)
	}
	copyFault = nil

	// A reader that is gone: its snapshot is swept at the next writer's
	// Open, however young; a live reader's snapshot is kept.
	live, err := openSnapshot(dir, Options{Logger: quietLogger()}, cliTuning)
	if err != nil {
		t.Fatal(err)
	}
	dead, lock, err := copyStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	lock.Close() // the reader died
	w := openAt(t, dir, Options{})
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the dead reader's snapshot %s is still there: %v", dead, err)
	}
	if _, err := os.Stat(live.snapshot); err != nil {
		t.Fatalf("the live reader's snapshot was removed: %v", err)
	}
	if se, err := live.Load(t.Context(), "small"); err != nil || len(se.Messages) != 3 {
		t.Fatalf("the live reader after the sweep: %v", err)
	}
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	if left := snapshots(); len(left) != 0 {
		t.Fatalf("Close left %v", left)
	}
	_ = w
}

// TestPermissions: a new store directory is 0700 and its files 0600 even
// under umask 000; an existing 0755 directory is narrowed to 0700; a
// 0777 one is refused.
func TestPermissions(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	base := t.TempDir()
	dir := filepath.Join(base, "new", "store")
	s := openAt(t, dir, Options{})
	commitN(t, s, "a", 3, kernel.SessionMeta{Updated: t0})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkModes(t, dir)

	// Readable by others: narrowed (what leaked, leaked; nothing could
	// have been planted).
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, open, Options{})
	commitN(t, s, "a", 2, kernel.SessionMeta{Updated: t0})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkModes(t, open)

	// Writable by others: refused and left as it is, since a session (an
	// approval) someone else put there cannot be told from ours.
	shared := filepath.Join(base, "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(shared, Options{}); !errors.Is(err, privfile.ErrNotPrivate) || !strings.Contains(err.Error(), "chmod 700") {
		t.Errorf("a store directory others may write was opened: %v", err)
	}
	if fi, _ := os.Stat(shared); fi.Mode().Perm() != 0o777 {
		t.Errorf("its mode was changed to %v", fi.Mode().Perm())
	}
}

func checkModes(t *testing.T, dir string) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v: group or others may access it", p, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// vlogTune puts values of 1 KiB or more in the value log, as the CLI
// tuning once did for 16 KiB: the tests of value-log damage and GC need
// values there.
func vlogTune(o bdg.Options) bdg.Options { return o.WithValueThreshold(1 << 10) }
