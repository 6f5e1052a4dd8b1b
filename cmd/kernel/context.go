package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"

	"github.com/agentkernel/agentkernel/internal/privfile"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/catalog"
	"github.com/agentkernel/agentkernel/kernel/queue"
	"github.com/agentkernel/agentkernel/kernel/replica"
	"github.com/agentkernel/agentkernel/kernel/tokenizer"
)

// ContextSection is the context section of kernel.yaml: thresholds as
// fractions of the model's context window.
type ContextSection struct {
	Warn       float64 `yaml:"warn"`
	Compact    float64 `yaml:"compact"`
	Hard       float64 `yaml:"hard"`
	Keep       float64 `yaml:"keep"`
	TrimTokens int     `yaml:"trim_tokens"`
}

// CompactionSection is the compaction section: who summarises, and how.
type CompactionSection struct {
	Model  string `yaml:"model"`
	Prompt string `yaml:"prompt"`
}

// modelSetup is what the catalog and the config say about the model.
type modelSetup struct {
	window    int
	prices    map[string]kernel.Price
	tokenizer kernel.Tokenizer
	entry     catalog.Model
	known     bool
	// protocols are how the model and its fallbacks take tools.
	protocols map[string]kernel.ModelTools
	// catalog is the loaded catalog (max_output for max_tokens).
	catalog *catalog.Catalog
}

// model resolves the model's window, prices and tokenizer: the catalog
// (embedded, then model.catalog) fills what kernel.yaml does not set;
// explicit model.context_window and model.prices win.
func (a *app) model() (modelSetup, error) {
	var files []string
	if a.cfg.Model.Catalog != "" {
		files = append(files, a.cfg.path(a.cfg.Model.Catalog))
	}
	cat, err := catalog.Load(files...)
	if err != nil {
		return modelSetup{}, fmt.Errorf("%s: %w", a.cfg.source(), err)
	}
	ms := modelSetup{prices: cat.Prices(), protocols: a.cfg.toolProtocols(cat), catalog: cat}
	maps.Copy(ms.prices, a.cfg.Model.Prices)
	ms.entry, ms.known = cat.Lookup(a.cfg.Model.Name)
	ms.window = a.cfg.Model.ContextWindow
	if ms.window == 0 && ms.known {
		ms.window = ms.entry.ContextWindow
	}
	if ms.known && ms.entry.Tokenizer != "" {
		enc, err := tokenizer.Get(ms.entry.Tokenizer)
		if err != nil {
			return modelSetup{}, err
		}
		ms.tokenizer = enc
	}
	return ms, nil
}

// contextTokenizer is the model's tokenizer (the catalog's), or the
// o200k_base encoding for a model the catalog does not know.
func (a *app) contextTokenizer() (kernel.Tokenizer, error) {
	ms, err := a.model()
	if err != nil {
		return nil, err
	}
	if ms.tokenizer != nil {
		return ms.tokenizer, nil
	}
	return tokenizer.Get("o200k_base")
}

// contextConfig is the kernel's ContextConfig from the config.
func (cfg *Config) contextConfig() kernel.ContextConfig {
	c := cfg.Context
	return kernel.ContextConfig{Warn: c.Warn, Compact: c.Compact, Hard: c.Hard, Keep: c.Keep, TrimTokens: c.TrimTokens,
		Model: cfg.Compaction.Model, Prompt: cfg.Compaction.Prompt}
}

// queueDir is where messages for running sessions are queued: beside the
// Badger directory (never inside it), or a private temporary directory
// for the memory store.
func (cfg *Config) queueDir() (dir string, temp bool, err error) {
	sc, err := cfg.storeConfig()
	if err != nil {
		return "", false, err
	}
	if sc.Kind == "memory" {
		d, err := privfile.TempDir("", "agentkernel-queue-")
		return d, true, err
	}
	return filepath.Join(filepath.Dir(sc.Dir), filepath.Base(sc.Dir)+"-queue"), false, nil
}

// openQueue opens the session queue and registers its cleanup: the
// store's own on a store replicas share (postgres), else a directory.
func (a *app) openQueue() (replica.Queue, error) {
	if sh, ok := a.store.(replica.Shared); ok {
		return sh.Queue(a.replicaName()), nil
	}
	dir, temp, err := a.cfg.queueDir()
	if err != nil {
		return nil, err
	}
	q, err := queue.Open(dir, func(msg string) { a.log.Warn(msg) })
	if err != nil {
		return nil, err
	}
	if temp {
		a.closers = append(a.closers, func() error { return os.RemoveAll(dir) })
	}
	return q, nil
}

// replicaName is this process's name among those sharing a store:
// --replica for kernel serve, else cli-HOST-PID.
func (a *app) replicaName() string {
	if a.replica == "" {
		host, _ := os.Hostname()
		a.replica = fmt.Sprintf("cli-%s-%d", host, os.Getpid())
	}
	return a.replica
}
