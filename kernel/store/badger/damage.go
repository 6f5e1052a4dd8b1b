package badger

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/agentkernel/agentkernel/kernel"
)

// A damaged message. Load gives a session whose message cannot be read (a
// value-log checksum mismatch, a value our own codec rejects) a
// placeholder in its place that says what was lost, and labels the
// session (LabelDamaged), so the session still loads and can be resumed.
// The damage found is recorded in quarantine/damage.json, which List
// reads to flag the sessions, `kernel sessions fsck` rewrites, and
// `fsck --repair` empties as it stores the placeholders for good.

// LabelDamaged is the label List and Load put on a session with messages
// that cannot be read; its value lists them ("message 4: …; message 9: …").
const LabelDamaged = "store.damaged"

// damageFile is the damage record in the quarantine directory, and
// damageLock the file whose flock its writers hold.
const (
	damageFile = "damage.json"
	damageLock = "damage.lock"
)

// damageRecord is quarantine/damage.json: per session, the damaged
// messages and what is known of each.
type damageRecord map[string]map[uint64]string

// damageMu makes the goroutines of one process take turns at damage.json;
// lockDamage (a flock on quarantine/damage.lock) the processes, since a
// reader records damage while a writer may too.
var damageMu sync.Mutex

func readDamage(dir string) damageRecord {
	b, err := os.ReadFile(filepath.Join(dir, quarantineDir, damageFile))
	if err != nil {
		return nil
	}
	var d damageRecord
	if json.Unmarshal(b, &d) != nil {
		return nil
	}
	return d
}

// updateDamage edits the record under damageMu and writes it atomically.
func updateDamage(dir string, edit func(damageRecord)) error {
	damageMu.Lock()
	defer damageMu.Unlock()
	q := filepath.Join(dir, quarantineDir)
	if _, err := os.Lstat(q); errors.Is(err, os.ErrNotExist) {
		// Nothing recorded yet: create the directory only to record some.
		d := damageRecord{}
		if edit(d); pruneDamage(d) == 0 {
			return nil
		}
		if err := os.Mkdir(q, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	unlock, err := lockDamage(filepath.Join(q, damageLock))
	if err != nil {
		return err
	}
	defer unlock()
	d := readDamage(dir)
	if d == nil {
		d = damageRecord{}
	}
	edit(d)
	if pruneDamage(d) == 0 {
		if err := os.Remove(filepath.Join(q, damageFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(q, damageFile+".tmp*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	tmp.Close()
	return os.Rename(tmp.Name(), filepath.Join(q, damageFile))
}

// pruneDamage drops the sessions without damaged messages from d and
// returns how many are left.
func pruneDamage(d damageRecord) int {
	for id, m := range d {
		if len(m) == 0 {
			delete(d, id)
		}
	}
	return len(d)
}

// recordDamagePending records one damaged message (the store need not be
// open).
func recordDamagePending(dir, id string, seq uint64, what string) error {
	return updateDamage(dir, func(d damageRecord) {
		if d[id] == nil {
			d[id] = map[uint64]string{}
		}
		d[id][seq] = what
	})
}

// damageLabel is the LabelDamaged value for the damaged messages m.
func damageLabel(m map[uint64]string) string {
	seqs := make([]uint64, 0, len(m))
	for s := range m {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = fmt.Sprintf("message %d: %s", s, m[s])
	}
	return strings.Join(parts, "; ")
}

// flagDamaged labels the sessions of list the damage record names.
func flagDamaged(dir string, list []kernel.SessionMeta) {
	d := readDamage(dir)
	if len(d) == 0 {
		return
	}
	for i := range list {
		if m := d[list[i].ID]; len(m) > 0 {
			labels := make(map[string]string, len(list[i].Labels)+1)
			for k, v := range list[i].Labels {
				labels[k] = v
			}
			labels[LabelDamaged] = damageLabel(m)
			list[i].Labels = labels
		}
	}
}
