package wasm

// PoolStats is one module's pool of ready instances, for metrics.
type PoolStats struct {
	// Module is the module's name.
	Module string
	// Size is the configured pool size; Ready the instances ready now.
	Size, Ready int
	// Hits are calls that took a ready instance; Misses calls that found
	// none and instantiated one themselves (they waited for it).
	Hits, Misses int64
}

// PoolStats reports the pools of the modules that have one and are
// loaded. Safe for concurrent use.
func (h *Host) PoolStats() []PoolStats {
	h.mu.Lock()
	modules := append([]*module(nil), h.modules...)
	h.mu.Unlock()
	var out []PoolStats
	for _, m := range modules {
		select {
		case <-m.loaded:
		default:
			continue
		}
		if m.pool == nil {
			continue
		}
		out = append(out, PoolStats{Module: m.name, Size: m.spec.pool, Ready: len(m.pool.ready),
			Hits: m.pool.hits.Load(), Misses: m.pool.misses.Load()})
	}
	return out
}
