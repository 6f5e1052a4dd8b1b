package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
)

// storeGroup is `kernel store`: the PostgreSQL schema and moving sessions
// between stores (docs/sessions.md).
var storeGroup = group{
	name: "store",
	footer: `migrate applies the schema changes this kernel knows to the database
store.dsn_env names, in one transaction (two replicas migrating at once take
turns), and refuses a schema newer than this kernel. kernel serve and kernel
run refuse a database whose schema is not the one they know, and say which
command to run.

copy moves sessions between stores of any kind, Badger to PostgreSQL and
back: each session (every one, or the IDs given) is exported from this
configuration's store, imported into the store of the configuration FILE
(--to-store DIR for a Badger directory), exported from there again and
compared byte for byte with the first export. A session the target already
holds is left alone if it is the same, and reported if it differs.
Flags: --config FILE, --store DIR`,
	subs: []subcmd{
		{name: "migrate", summary: "create or upgrade the PostgreSQL schema (store.driver postgres)", flags: noFlags(storeMigrateCmd)},
		{name: "copy", synopsis: "--to FILE [ID...]", summary: "copy sessions into the store another configuration names",
			args: "[ID...]", flags: storeCopyCmd},
	},
}

func storeMigrateCmd(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
	if len(pos) > 0 {
		return usageError("store migrate takes no arguments (got %q)", pos[0])
	}
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	return storeMigrate(ctx, cfg, env)
}

func storeCopyCmd(fs *flag.FlagSet) subRun {
	to := fs.String("to", "", "the configuration `FILE` whose store receives the sessions")
	toStore := fs.String("to-store", "", "the Badger `DIR` that receives the sessions (with --to: overrides its store.dir)")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
		if *to == "" && *toStore == "" {
			return usageError("store copy needs --to FILE (a configuration whose store receives the sessions) or --to-store DIR")
		}
		cfg, err := cf.load()
		if err != nil {
			return err
		}
		dst := &commonFlags{store: *toStore}
		if *to != "" {
			dst.config = stringList{*to}
		}
		dcfg, err := dst.load()
		if err != nil {
			return fmt.Errorf("--to: %w", err)
		}
		return storeCopy(ctx, cfg, dcfg, pos, env)
	}
}

// storeMigrate brings the postgres schema up to date.
func storeMigrate(ctx context.Context, cfg *Config, env *cliEnv) error {
	sc, err := cfg.storeConfig()
	if err != nil {
		return err
	}
	if sc.Kind != "postgres" {
		kind := sc.Kind
		if kind == "" {
			kind = "badger"
		}
		return usageError("store migrate is for the postgres store; %s keeps sessions in %s (store.driver), which needs no migration", cfg.source(), kind)
	}
	dsn, err := sc.postgresDSN(cfg)
	if err != nil {
		return err
	}
	res, err := postgres.Migrate(ctx, dsn, sc.postgresOptions(newLogger(env.stderr)))
	if err != nil {
		return fmt.Errorf("store.dsn_env %s: %w", sc.DSNEnv, err)
	}
	if len(res.Applied) == 0 {
		fmt.Fprintf(env.stderr, "the schema is up to date (version %d)\n", res.To)
		return nil
	}
	for _, m := range res.Applied {
		fmt.Fprintf(env.stderr, "applied %s\n", m)
	}
	fmt.Fprintf(env.stderr, "schema version %d -> %d\n", res.From, res.To)
	return nil
}

// storeCopy copies sessions ids (all when empty) from cfg's store into
// dcfg's, checking each by comparing exports.
func storeCopy(ctx context.Context, cfg, dcfg *Config, ids []string, env *cliEnv) error {
	src := &app{cfg: cfg, log: newLogger(env.stderr)}
	if err := src.openStore(true); err != nil {
		return fmt.Errorf("the source store: %w", err)
	}
	defer src.Close()
	dst := &app{cfg: dcfg, log: newLogger(env.stderr)}
	if err := dst.openStore(false); err != nil {
		return fmt.Errorf("the target store: %w", err)
	}
	defer dst.Close()
	ex, ok := src.store.(kernel.SessionExporter)
	if !ok {
		return errors.New("the source store cannot export sessions")
	}
	dex, ok1 := dst.store.(kernel.SessionExporter)
	im, ok2 := dst.store.(kernel.SessionImporter)
	if !ok1 || !ok2 {
		return errors.New("the target store cannot import sessions")
	}
	if len(ids) == 0 {
		list, err := src.store.List(ctx)
		if err != nil {
			return err
		}
		for _, m := range list {
			ids = append(ids, m.ID)
		}
	}
	var copied, same int
	var errs []error
	for _, id := range ids {
		var want, got bytes.Buffer
		if err := ex.Export(ctx, id, &want); err != nil {
			errs = append(errs, err)
			continue
		}
		_, err := dst.store.Load(ctx, id)
		switch {
		case err == nil:
			if err := dex.Export(ctx, id, &got); err != nil {
				errs = append(errs, err)
			} else if bytes.Equal(got.Bytes(), want.Bytes()) {
				same++
			} else {
				errs = append(errs, fmt.Errorf("session %s: the target holds a different session with this id (left alone)", id))
			}
			continue
		case !errors.Is(err, kernel.ErrSessionNotFound):
			errs = append(errs, err)
			continue
		}
		if _, err := im.Import(ctx, bytes.NewReader(want.Bytes())); err != nil {
			errs = append(errs, fmt.Errorf("session %s: %w", id, err))
			continue
		}
		if err := dex.Export(ctx, id, &got); err != nil {
			errs = append(errs, fmt.Errorf("session %s: export the copy: %w", id, err))
			continue
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			// The target cannot hold the session faithfully: take the
			// copy back rather than leave a lossy one.
			undo := "removed from the target"
			if d, ok := dst.store.(kernel.SessionDeleter); !ok {
				undo = "left in the target"
			} else if err := d.Delete(ctx, id); err != nil {
				undo = "left in the target: " + err.Error()
			}
			errs = append(errs, fmt.Errorf("session %s: the copy differs from the original at %s (%s)", id, firstDiff(want.Bytes(), got.Bytes()), undo))
			continue
		}
		copied++
		fmt.Fprintln(env.stdout, "copied", id)
	}
	fmt.Fprintf(env.stderr, "%d sessions copied and checked, %d already there, %d failed\n", copied, same, len(errs))
	return errors.Join(errs...)
}

// firstDiff says where two exports first differ: the line.
func firstDiff(a, b []byte) string {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return fmt.Sprintf("line %d", i+1)
		}
	}
	return fmt.Sprintf("%d lines against %d", len(la), len(lb))
}
