//go:build linux

package subprocess

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/cachemac"
)

// TestStoreSweep: after an install the store keeps the new entry, the 15
// most recently used others and any used within the day; it removes
// entries unused for 30 days, the least recently used beyond the bound
// (16) that were not used within the day,
// entries without a record and a killed install's old temporary files,
// and leaves its key, its lock and a fresh temporary file alone.
func TestStoreSweep(t *testing.T) {
	dir := t.TempDir()
	mac, err := cachemac.Open(dir, "plugin-bin", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &binStore{dir: dir, mac: mac}
	now := time.Now()
	sum := func(i int) string { return fmt.Sprintf("%064x", i) }
	put := func(i int, used time.Time, rec bool) {
		p := s.entry(sum(i))
		if err := os.WriteFile(p, []byte("x"), 0o500); err != nil {
			t.Fatal(err)
		}
		if !rec {
			return
		}
		if err := os.WriteFile(p+".rec", []byte("r"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p+".rec", used, used); err != nil {
			t.Fatal(err)
		}
	}
	put(0, now.Add(-40*24*time.Hour), true) // the one installed now, whatever its record says
	for i := 1; i <= 17; i++ {
		put(i, now.Add(-time.Duration(i)*time.Minute), true) // used within the day
	}
	for i := 18; i <= 20; i++ {
		put(i, now.Add(-time.Duration(i)*time.Hour*3), true) // two to three days ago
	}
	put(21, now.Add(-31*24*time.Hour), true) // unused for 31 days
	put(24, now, false)                      // no record
	oldTmp, newTmp := filepath.Join(dir, binStoreTemp+"mb-1"), filepath.Join(dir, "."+sum(5)+".rec.tmp-2")
	for _, p := range []string{oldTmp, newTmp} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(oldTmp, now.Add(-2*time.Hour), now.Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	s.sweep(sum(0), now)

	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, de := range des {
		got = append(got, de.Name())
	}
	var want []string
	// 1-17 were used within the day: beyond the bound (16 and 17), they
	// stay all the same; 18-20 are beyond it and older.
	for i := range 18 {
		want = append(want, sum(i), sum(i)+".rec")
	}
	want = append(want, filepath.Base(newTmp), ".lock", cachemac.KeyFile)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after the sweep:\n got %v\nwant %v", got, want)
	}

	// Under the bound, only age removes: one unused for 31 days goes,
	// one used an hour ago stays.
	dir = t.TempDir()
	s = &binStore{dir: dir, mac: mac}
	put(0, now, true)
	put(1, now.Add(-31*24*time.Hour), true)
	put(2, now.Add(-time.Hour), true)
	s.sweep(sum(0), now)
	for i, keep := range []bool{true, false, true} {
		if _, err := os.Lstat(s.entry(sum(i)) + ".rec"); (err == nil) != keep {
			t.Errorf("entry %d: kept %v, want %v", i, err == nil, keep)
		}
		if _, err := os.Lstat(s.entry(sum(i))); (err == nil) != keep {
			t.Errorf("entry %d's binary: kept %v, want %v", i, err == nil, keep)
		}
	}
}
