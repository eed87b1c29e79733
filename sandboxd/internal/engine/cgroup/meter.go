package cgroup

import (
	"sync"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
)

// Meter is what a sandbox's Process.Usage reports: its group's live
// figures while it runs, and once it has exited the figures Stop was given
// (read before the group went). Without a group it reports zero usage.
// The zero Meter is ready to use.
type Meter struct {
	mu      sync.Mutex
	g       *Group
	stopped bool
	final   engine.Usage // valid when stopped
}

// Watch makes g the group whose figures Usage reports.
func (m *Meter) Watch(g *Group) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.g = g
}

// Usage reports the final figures after Stop, else the group's live ones.
func (m *Meter) Usage() engine.Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped || m.g == nil {
		return m.final
	}
	return m.g.Usage()
}

// Stop makes u the figures Usage reports from now on.
func (m *Meter) Stop(u engine.Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.final, m.stopped = u, true
}
