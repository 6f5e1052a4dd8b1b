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

// PoolStats reports the pools of the modules configured with one; a
// module not loaded yet has none ready. Safe for concurrent use.
func (h *Host) PoolStats() []PoolStats {
	h.mu.Lock()
	modules := append([]*module(nil), h.modules...)
	h.mu.Unlock()
	var out []PoolStats
	for _, m := range modules {
		if m.spec.pool <= 0 {
			continue
		}
		ps := PoolStats{Module: m.name, Size: m.spec.pool}
		select {
		case <-m.loaded:
			if p := m.pool; p != nil {
				ps.Ready, ps.Hits, ps.Misses = len(p.ready), p.hits.Load(), p.misses.Load()
			}
		default:
		}
		out = append(out, ps)
	}
	return out
}
