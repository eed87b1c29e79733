package gateway

import (
	"context"
	"sync"
)

// callTracker counts the tool calls in flight, so that shutdown can refuse
// new ones and wait for the running ones.
type callTracker struct {
	mu       sync.Mutex
	draining bool
	running  int
	idle     chan struct{} // closed when draining and nothing runs
}

// begin admits a call, or returns errClosed once draining began. end must
// be called when the call is over.
func (c *callTracker) begin() (end func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining {
		return nil, errClosed
	}
	c.running++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.running--
		if c.draining && c.running == 0 {
			close(c.idle)
		}
	}, nil
}

// drain refuses new calls and returns a channel closed when none runs.
func (c *callTracker) drain() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.draining {
		c.draining = true
		c.idle = make(chan struct{})
		if c.running == 0 {
			close(c.idle)
		}
	}
	return c.idle
}

// inFlight reports how many calls are running.
func (c *callTracker) inFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// Drain begins a graceful shutdown: new run_python calls get a "shutting
// down" tool error at once, and Drain waits for the running ones to finish
// until ctx ends. It returns ctx's error if calls were still running then;
// Close afterwards destroys their sandboxes, which ends them.
func (g *Gateway) Drain(ctx context.Context) error {
	idle := g.calls.drain()
	if n := g.calls.inFlight(); n > 0 {
		g.logger.Info("shutting down: waiting for running calls", "calls", n)
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		g.logger.Warn("shutting down: calls still running at the deadline are stopped", "calls", g.calls.inFlight())
		return ctx.Err()
	}
}
