package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/badger"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// StoreConfig is the store section of kernel.yaml.
type StoreConfig struct {
	// Kind is badger (default: sessions on disk) or memory (gone at exit).
	Kind string `yaml:"kind"`
	// Dir is the Badger directory (default $XDG_DATA_HOME/agentkernel).
	Dir            string `yaml:"dir"`
	badger.Options `yaml:",inline"`
	// defaultDir is true when neither --store nor store.dir chose Dir.
	defaultDir bool
}

func (cfg *Config) storeConfig() (StoreConfig, error) {
	var sc StoreConfig
	if err := cfg.section("store", &cfg.Store, &sc); err != nil {
		return sc, err
	}
	if cfg.storeDir != "" {
		sc.Dir = cfg.storeDir
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

// decodeNode decodes a YAML node that may be empty (absent).
func decodeNode(n *yaml.Node, v any) error {
	if n == nil || n.Kind == 0 {
		return nil
	}
	return n.Decode(v)
}

var _ kernel.Store = (*badger.Store)(nil)

// requireStoreSpace fails when the store's volume cannot hold one step
// (1 MiB on top of the store's reserve): before a run announces its
// session.
func (a *app) requireStoreSpace() error {
	if bs, ok := a.store.(*badger.Store); ok {
		return bs.CheckSpace(1 << 20)
	}
	return nil
}
