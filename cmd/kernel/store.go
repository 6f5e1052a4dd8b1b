package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/badger"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
)

// StoreConfig is the store section of kernel.yaml.
type StoreConfig struct {
	// Driver is badger (default: sessions on disk), memory (gone at
	// exit) or postgres (a database several kernel serve replicas share).
	Driver string `yaml:"driver"`
	// Kind is Driver's first spelling, still accepted; storeConfig folds
	// it into Kind, which the rest of the code reads.
	Kind string `yaml:"kind"`
	// Dir is the Badger directory (default $XDG_DATA_HOME/agentkernel).
	Dir            string `yaml:"dir"`
	badger.Options `yaml:",inline"`
	// DSNEnv names the environment variable that holds the PostgreSQL
	// connection string (never the file: it holds a password).
	DSNEnv string `yaml:"dsn_env"`
	// The postgres store's pool and retry settings (postgres.Options).
	MaxConns         int32         `yaml:"max_conns"`
	StatementTimeout time.Duration `yaml:"statement_timeout"`
	ConnectTimeout   time.Duration `yaml:"connect_timeout"`
	RetryFor         time.Duration `yaml:"retry_for"`
	// defaultDir is true when neither --store nor store.dir chose Dir.
	defaultDir bool
}

func (cfg *Config) storeConfig() (StoreConfig, error) {
	var sc StoreConfig
	if err := cfg.section("store", &cfg.Store, &sc); err != nil {
		return sc, err
	}
	if sc.Driver != "" {
		if sc.Kind != "" && sc.Kind != sc.Driver {
			return sc, fmt.Errorf("%s: store.driver is %q but store.kind is %q: they are one setting (kind is its older name); keep driver", cfg.source(), sc.Driver, sc.Kind)
		}
		sc.Kind = sc.Driver
	}
	if cfg.storeDir != "" {
		if sc.Kind == "postgres" {
			return sc, usageError("--store %s names a Badger directory, but %s keeps sessions in PostgreSQL (store.driver postgres): drop --store", cfg.storeDir, cfg.source())
		}
		sc.Dir = cfg.storeDir
	}
	if sc.Kind == "postgres" {
		if sc.DSNEnv == "" {
			return sc, fmt.Errorf("%s: store.dsn_env: the postgres store needs the name of the environment variable holding its connection string (e.g. dsn_env: AGENTKERNEL_DSN)", cfg.source())
		}
		return sc, nil
	}
	if sc.Dir == "" {
		d, err := badger.DefaultDir()
		if err != nil {
			return sc, fmt.Errorf("find the default session store: %w (set store.dir or --store)", err)
		}
		sc.Dir, sc.defaultDir = d, true
	} else {
		sc.Dir = cfg.path(sc.Dir)
	}
	return sc, nil
}

// openStore opens the configured store, read-only when asked (the
// sessions commands), and registers its Close with the app.
func (a *app) openStore(readOnly bool) error {
	sc, err := a.cfg.storeConfig()
	if err != nil {
		return err
	}
	if sc.Kind == "memory" {
		a.store = memory.New()
		return nil
	}
	if sc.Kind == "postgres" {
		// A server starts without its database and becomes ready when
		// it is back; a command fails at once.
		s, err := openPostgres(context.Background(), a.cfg, sc, a.log.Named("store"), a.serverStore)
		if err != nil {
			return err
		}
		a.store = s
		a.closers = append(a.closers, s.Close)
		return nil
	}
	if readOnly {
		if _, err := os.Stat(filepath.Join(sc.Dir, "MANIFEST")); errors.Is(err, fs.ErrNotExist) {
			// A store chosen by --store or store.dir that does not exist
			// is a typo, not an empty store.
			if _, err := os.Stat(sc.Dir); errors.Is(err, fs.ErrNotExist) && !sc.defaultDir {
				return fmt.Errorf("no session store at %s: the directory does not exist (check --store or store.dir)", sc.Dir)
			}
			a.store = memory.New() // never written: nothing to read
			return nil
		}
	}
	sc.Options.ReadOnly = readOnly
	if a.serverStore {
		sc.Options.Server = true
	}
	sc.Options.Logger = a.log.Named("store")
	s, err := badger.Open(sc.Dir, sc.Options)
	if err != nil {
		return err
	}
	a.store = s
	a.closers = append(a.closers, s.Close)
	return nil
}

// postgresOptions are the postgres store's options from the store
// section.
func (sc StoreConfig) postgresOptions(log hclog.Logger) postgres.Options {
	return postgres.Options{MaxConns: sc.MaxConns, StatementTimeout: sc.StatementTimeout, ConnectTimeout: sc.ConnectTimeout,
		RetryFor: sc.RetryFor, TTL: sc.TTL, GCInterval: sc.GCInterval, Logger: log}
}

// postgresDSN reads the connection string from the variable store.dsn_env
// names.
func (sc StoreConfig) postgresDSN(cfg *Config) (string, error) {
	dsn := os.Getenv(sc.DSNEnv)
	if dsn == "" {
		return "", fmt.Errorf("%s: store.dsn_env: the environment variable %s is not set: export %s=postgres://USER:PASSWORD@HOST:PORT/DATABASE", cfg.source(), sc.DSNEnv, sc.DSNEnv)
	}
	return dsn, nil
}

// openPostgres opens the postgres store the configuration names.
func openPostgres(ctx context.Context, cfg *Config, sc StoreConfig, log hclog.Logger, wait bool) (*postgres.Store, error) {
	dsn, err := sc.postgresDSN(cfg)
	if err != nil {
		return nil, err
	}
	opts := sc.postgresOptions(log)
	opts.WaitForDatabase = wait
	s, err := postgres.Open(ctx, dsn, opts)
	if err != nil {
		return nil, fmt.Errorf("store.dsn_env %s: %w", sc.DSNEnv, err)
	}
	return s, nil
}

// decodeNode decodes a YAML node that may be empty (absent).
func decodeNode(n *yaml.Node, v any) error {
	if n == nil || n.Kind == 0 {
		return nil
	}
	return n.Decode(v)
}

// requireStoreSpace fails when the store's volume cannot hold one step
// (1 MiB on top of the store's reserve): before a run announces its
// session.
func (a *app) requireStoreSpace() error {
	if sc, ok := a.store.(kernel.SpaceChecker); ok {
		return sc.CheckSpace(1 << 20)
	}
	return nil
}
