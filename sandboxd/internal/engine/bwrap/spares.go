package bwrap

// startSpare starts plan's sandbox from a spare launcher, or returns nil
// when there is none or it cannot be used.
func (b *Engine) startSpare(plan *startPlan) *process {
	l := b.takeSpare(plan.key)
	if l == nil {
		return nil
	}
	id := plan.spec.ID
	if err := l.cg.Rename(id); err != nil {
		b.logger.Debug("spare sandbox cgroup keeps its name", "sandbox.id", id, "error", err)
	}
	p, err := l.release(plan.data, plan.logger)
	if err == nil {
		err = b.track(p)
	}
	if err != nil {
		b.logger.Debug("spare launcher unusable; starting afresh", "sandbox.id", id, "error", err)
		return nil
	}
	return p
}

// takeSpare removes and returns a spare launcher made for key, or nil.
func (b *Engine) takeSpare(key launchKey) *launcher {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, l := range b.spares {
		if l.key == key {
			b.spares = append(b.spares[:i], b.spares[i+1:]...)
			return l
		}
	}
	return nil
}

// refillSpares makes plan the one spares are kept for (discarding spares
// made for another) and starts fillSpares unless it runs.
func (b *Engine) refillSpares(plan *startPlan) {
	b.mu.Lock()
	var stale []*launcher
	if b.spareFor == nil || b.spareFor.key != plan.key {
		b.spareFor, stale, b.spares = plan, b.spares, nil
	}
	start := !b.live.Closed() && !b.filling && len(b.spares) < b.cfg.Spares
	if start {
		b.filling = true
		b.fills.Add(1)
	}
	b.fills.Add(len(stale)) // Close waits for these too
	b.mu.Unlock()
	for _, l := range stale {
		go func() { defer b.fills.Done(); l.discard() }()
	}
	if start {
		go b.fillSpares()
	}
}

// fillSpares launches spares for spareFor until there are cfg.Spares of
// them. A failure is logged and ends the round; the next Start tries again.
func (b *Engine) fillSpares() {
	defer b.fills.Done()
	for {
		b.mu.Lock()
		plan := b.spareFor
		if b.live.Closed() || len(b.spares) >= b.cfg.Spares {
			b.filling = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		l, err := b.launch(plan, "spare")
		b.mu.Lock()
		if err != nil {
			b.filling = false
			b.mu.Unlock()
			b.logger.Warn("could not prepare a spare sandbox launcher", "error", err)
			return
		}
		keep := !b.live.Closed() && b.spareFor.key == l.key
		if keep {
			b.spares = append(b.spares, l)
		}
		b.mu.Unlock()
		if !keep {
			l.discard()
		}
	}
}
