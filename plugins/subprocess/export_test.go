package subprocess

import "context"

// Exported for the benchmarks in package subprocess_test.

// VerifyCopy makes the host's verified copy of cfg's binary.
func VerifyCopy(h *Host, cfg PluginConfig) (exe string, done func(), err error) {
	cfg, err = cfg.normalize()
	if err != nil {
		return "", nil, err
	}
	done, err = h.begin()
	if err != nil {
		return "", nil, err
	}
	exe, _, err = verifyCopy(cfg, h.dir)
	return exe, done, err
}

// StartProcess starts one process of the verified copy exe (exec,
// handshake, Describe) and returns a function that kills it.
func StartProcess(h *Host, cfg PluginConfig, exe string) (kill func(), err error) {
	cfg, err = cfg.normalize()
	if err != nil {
		return nil, err
	}
	if cfg.Interpreter != nil {
		if err := checkInterpreter(cfg); err != nil {
			return nil, err
		}
	}
	inst, err := startInstance(context.Background(), h, cfg, exe)
	if err != nil {
		return nil, err
	}
	return func() {
		inst.kill("benchmark")
		inst.cleanup.Do(inst.client.Kill)
	}, nil
}

// StoreHits counts the starts the binary store spared a verification.
func StoreHits(h *Host) int64 { return h.storeHits.Load() }

// StoredCopy is VerifyCopy through the host's binary store: its entry of
// cfg's pin if it holds one that checks, else a new one.
func StoredCopy(h *Host, cfg PluginConfig) (exe string, done func(), err error) {
	cfg, err = cfg.normalize()
	if err != nil {
		return "", nil, err
	}
	done, err = h.begin()
	if err != nil {
		return "", nil, err
	}
	exe, _, _, err = h.verified(cfg, false)
	return exe, done, err
}
