package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/export"
	"github.com/agentkernel/agentkernel/policy"
)

// diffFlags are the flags of `kernel policy diff` and `coverage`.
type diffFlags struct {
	sessions stringList
	expect   stringList
	since    string
	exports  string
	json     bool
}

// policyDiff is `kernel policy diff OLD NEW` and `kernel policy coverage
// FILE`: both re-decide a set of sessions (see eachSession); coverage is
// the diff of a file with itself, reporting its coverage only.
func policyDiff(ctx context.Context, a *app, env *cliEnv, sub string, pos []string, opts policy.Options, f diffFlags) error {
	want := 2
	if sub == "coverage" {
		want = 1
	}
	if len(pos) != want {
		return exitError{code: 2, msg: fmt.Sprintf("policy %s needs %d policy files, got %d", sub, want, len(pos))}
	}
	var expect []policy.ExpectedChange
	for _, s := range f.expect {
		x, err := policy.ParseExpectedChange(s)
		if err != nil {
			return exitError{code: 2, msg: "--expect: " + err.Error()}
		}
		expect = append(expect, x)
	}
	if sub == "coverage" && len(expect) > 0 {
		return exitError{code: 2, msg: "policy coverage takes no --expect"}
	}
	var files [2]*policy.Policy
	for i := range files {
		p, err := policy.CompileFile(ctx, pos[min(i, len(pos)-1)], opts)
		if err != nil {
			return policyCancelled(err)
		}
		files[i] = p
	}
	d := policy.NewDiff(files[0], files[1], policy.DiffOptions{Tools: opts.Tools, Expect: expect, Redact: scrubText})
	if err := eachSession(ctx, a, f, func(s *kernel.Session) error { return d.Add(ctx, s) }); err != nil {
		return policyCancelled(err)
	}
	rep := d.Report()
	if sub == "coverage" {
		c := rep.Coverage.New
		if f.json {
			return writeJSON(env, c)
		}
		fmt.Fprintf(env.stdout, "%d sessions, %d calls\n", rep.Sessions, rep.Calls)
		return c.Format(env.stdout)
	}
	var err error
	if f.json {
		err = writeJSON(env, rep)
	} else {
		err = rep.Format(env.stdout)
	}
	if err != nil {
		return err
	}
	if rep.Unexpected > 0 {
		return exitError{code: exitFailure, msg: fmt.Sprintf("%d decisions change between allow and deny/ask without an --expect that matches them (e.g. --expect %s)",
			rep.Unexpected, firstUnexpected(rep))}
	}
	return nil
}

// firstUnexpected is an --expect that would match the first unexpected
// change, for the error message.
func firstUnexpected(rep *policy.DiffReport) string {
	for _, c := range rep.Changes {
		if c.Gating && !c.Expected {
			x := policy.ExpectedChange{From: c.Old.Effect, To: c.New.Effect}
			if len(c.New.Rules) > 0 {
				x.Rule = c.New.Rules[0]
			} else if len(c.Old.Rules) > 0 {
				x.Rule = c.Old.Rules[0]
			}
			return x.String()
		}
	}
	return "FROM:TO@RULE"
}

// eachSession calls visit with every session the flags select, one at a
// time: the exported sessions of --exports, else the store's (--session,
// else all), newer than --since.
func eachSession(ctx context.Context, a *app, f diffFlags, visit func(*kernel.Session) error) error {
	var after time.Time
	if f.since != "" {
		t, err := parseSince(f.since)
		if err != nil {
			return exitError{code: 2, msg: "--since: " + err.Error()}
		}
		after = t
	}
	keep := func(s *kernel.Session) bool {
		return (len(f.sessions) == 0 || slices.Contains(f.sessions, s.Meta.ID)) && !s.Meta.Updated.Before(after)
	}
	// names are export files or session ids, load reads one.
	var names []string
	var load func(string) (*kernel.Session, error)
	if f.exports != "" {
		files, err := filepath.Glob(filepath.Join(f.exports, "*.jsonl"))
		if err != nil {
			return err
		}
		if len(files) == 0 {
			return fmt.Errorf("--exports %s: no exported sessions (*.jsonl) in the directory", f.exports)
		}
		names = files
		load = func(file string) (*kernel.Session, error) { return readExport(ctx, file) }
	} else {
		if err := a.openStore(true); err != nil {
			return err
		}
		names = f.sessions
		if len(names) == 0 {
			list, err := a.store.List(ctx)
			if err != nil {
				return err
			}
			for _, m := range list {
				if !m.Updated.Before(after) {
					names = append(names, m.ID)
				}
			}
			slices.Reverse(names) // oldest first: the report reads in time order
		}
		load = func(id string) (*kernel.Session, error) { return a.store.Load(ctx, id) }
	}
	for _, n := range names {
		s, err := load(n)
		if err != nil {
			return err
		}
		if keep(s) {
			if err := visit(s); err != nil {
				return err
			}
		}
	}
	return nil
}

func readExport(ctx context.Context, file string) (*kernel.Session, error) {
	r, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	s, err := export.Read(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return s, nil
}

// parseSince reads --since: an age (7d, 12h, 90m) before now, or a date
// (2026-11-01) or time (RFC 3339).
func parseSince(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	age, err := parseAge(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an age (7d, 12h, 90m) nor a date (2026-11-01, or RFC 3339): %w", s, err)
	}
	return time.Now().Add(-age), nil
}
