package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/badger"
)

// runFsck is `kernel sessions fsck [--repair] [ID...]`: one line per
// session, then the damaged messages of each damaged one, then a summary.
// It fails (exit 1) when damage is left unrepaired.
func runFsck(ctx context.Context, env *cliEnv, c kernel.StoreChecker, ids []string, repair bool) error {
	stop := statusLine(env.stderr, "checking every stored value", nil)
	rep, err := c.Fsck(ctx, ids, repair)
	stop()
	if rep != nil {
		for _, f := range rep.Sessions {
			switch {
			case f.OK():
				fmt.Fprintf(env.stdout, "ok       %s  %d messages\n", f.ID, f.Messages)
				continue
			case !f.Unrepaired():
				fmt.Fprintf(env.stdout, "repaired %s  %d messages, %d replaced by placeholders\n", f.ID, f.Messages, len(f.Damaged))
			default:
				fmt.Fprintf(env.stdout, "DAMAGED  %s  %d messages\n", f.ID, f.Messages)
			}
			if f.Meta != nil {
				fmt.Fprintf(env.stdout, "         metadata: %v (remove the session with `kernel sessions rm %s`)\n", f.Meta, f.ID)
			}
			if f.Pending != nil {
				fmt.Fprintf(env.stdout, "         pending approval: %v\n", f.Pending)
			}
			seqs := make([]uint64, 0, len(f.Damaged))
			for s := range f.Damaged {
				seqs = append(seqs, s)
			}
			slices.Sort(seqs)
			for _, s := range seqs {
				fmt.Fprintf(env.stdout, "         message %d: %s\n", s, f.Damaged[s])
			}
			for _, p := range f.Problems {
				where, done := "session", ""
				if p.Seq != 0 {
					where = fmt.Sprintf("message %d", p.Seq)
				}
				if p.Repaired {
					done = " (repaired)"
				}
				fmt.Fprintf(env.stdout, "         %s: %s%s\n", where, p.Text, done)
			}
		}
		for _, q := range rep.Quarantined {
			fmt.Fprintf(env.stderr, "quarantined copy of a damaged value log: %s\n", q)
		}
	}
	if err != nil {
		return err
	}
	bad, fixable := 0, 0
	for _, f := range rep.Sessions {
		if f.Unrepaired() {
			bad++
			if len(f.Damaged) > 0 && !f.Repaired {
				fixable++
			}
		}
	}
	fmt.Fprintf(env.stderr, "%d sessions checked, %d damaged", len(rep.Sessions), rep.Damaged())
	if repair {
		fmt.Fprintf(env.stderr, ", %d repaired", rep.Damaged()-bad)
	}
	fmt.Fprintln(env.stderr)
	if bad == 0 {
		return nil
	}
	msg := fmt.Sprintf("%d damaged sessions", bad)
	if fixable > 0 {
		msg += "; run `kernel sessions fsck --repair` to keep placeholders for the lost messages"
	}
	if bad > fixable {
		msg += "; a history that breaks the pairing of calls and results cannot be repaired in place: export the session, fix it by hand and import it, or remove it with `kernel sessions rm`"
	}
	return exitError{code: 1, msg: msg}
}

// statusText is a session's status for the session table, flagged when
// the store found damaged messages in it (see `sessions fsck`).
func statusText(m kernel.SessionMeta) string {
	if m.Labels[badger.LabelDamaged] != "" {
		return string(m.Status) + " DAMAGED"
	}
	return string(m.Status)
}

// reclaimSpace compacts the store after `sessions rm` and `sessions gc`
// so the removed sessions' disk space comes back, and says how much.
func reclaimSpace(ctx context.Context, env *cliEnv, st kernel.Store) {
	bs, ok := st.(kernel.SpaceReclaimer)
	if !ok {
		return
	}
	stop := statusLine(env.stderr, "giving the removed sessions' disk space back", nil)
	r, err := bs.Reclaim(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(env.stderr, "reclaiming disk space failed: %v\n", err)
		return
	}
	fmt.Fprintf(env.stderr, "store %s: %s in %d files -> %s in %d files\n", r.Where, humanBytes(r.Before), r.FilesBefore, humanBytes(r.After), r.FilesAfter)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
