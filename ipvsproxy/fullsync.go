package ipvsproxy

// RequestFullSync makes the next Sync a full one, as the periodic
// --ipvs-sync-period timer does: the benchmarks' periodic full resync.
func (p *Proxier) RequestFullSync() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.needFull = true
}
