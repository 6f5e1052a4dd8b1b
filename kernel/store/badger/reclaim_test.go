//go:build unix

package badger

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// TestReclaim: gc of 90% of the sessions gives back at least 80% of their
// bytes. "Their bytes" is the difference between the full store and a
// store built with only the kept sessions.
func TestReclaim(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	const sessions = 40
	fillStore := func(dir string, keep func(i int) bool) {
		s := openAt(t, dir, Options{Tune: vlogTune})
		for i := range sessions {
			if !keep(i) {
				continue
			}
			id := fmt.Sprintf("s%02d", i)
			updated := t0
			if i%10 == 0 {
				updated = t0.Add(1000 * time.Hour) // the kept tenth
			}
			largeSession(t, s, id, 6, 24<<10) // in the value log
			commitN(t, s, id+"x", 30, kernel.SessionMeta{Updated: updated})
			if err := s.Commit(t.Context(), id, kernel.Step{Meta: kernel.SessionMeta{Updated: updated}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	full, kept := t.TempDir(), t.TempDir()
	fillStore(full, func(int) bool { return true })
	fillStore(kept, func(i int) bool { return i%10 == 0 })
	fullSize, _ := StoreSize(full)
	keptSize, _ := StoreSize(kept)

	now := t0.Add(1001 * time.Hour)
	s := openAt(t, full, Options{Tune: vlogTune, Now: func() time.Time { return now }})
	removed, err := s.GC(t.Context(), 10*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != sessions*2*9/10 {
		t.Fatalf("gc removed %d sessions, want %d", len(removed), sessions*2*9/10)
	}
	r, err := s.Reclaim(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	after, files := StoreSize(full)
	theirs := fullSize - keptSize
	got := fullSize - after
	t.Logf("full %d, kept-only %d, after gc+reclaim %d (Reclaim: %d -> %d bytes, %d -> %d files, %d value logs rewritten); reclaimed %.0f%% of the removed sessions' %d bytes; %d files",
		fullSize, keptSize, after, r.Before, r.After, r.FilesBefore, r.FilesAfter, r.Rewritten, 100*float64(got)/float64(theirs), theirs, files)
	if float64(got) < 0.8*float64(theirs) {
		t.Fatalf("reclaimed %d of the removed sessions' %d bytes (%.0f%%), want at least 80%%", got, theirs, 100*float64(got)/float64(theirs))
	}
	s = openAt(t, full, Options{})
	l, err := s.List(t.Context())
	if err != nil || len(l) != sessions*2/10 {
		t.Fatalf("after reclaim: %d sessions, %v", len(l), err)
	}
	for _, m := range l {
		if _, err := s.Load(t.Context(), m.ID); err != nil {
			t.Fatal(err)
		}
	}
}
