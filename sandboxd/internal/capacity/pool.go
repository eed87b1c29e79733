// Package capacity decides how many sandboxes run and which: the warm
// pool of ready sandboxes (Pool), the places under --max-sessions and the
// session whose sandbox makes room (Room), and the stopping of idle
// sessions' sandboxes (Reaper). It sees sessions only through Session.
package capacity

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/metrics"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/randomid"
)

// PoolConfig says how to start a sandbox, and how many to keep ready.
type PoolConfig struct {
	Engine engine.Engine
	// AgentDir holds the agent's files on the host; Argv runs it.
	AgentDir string
	Argv     []string
	Env      map[string]string
	Limits   engine.Limits
	// Mounts are the operator's host directories, in every sandbox, and
	// TenantMounts those of one tenant's sandboxes only, after Mounts.
	Mounts       []engine.Mount
	TenantMounts map[string][]engine.Mount
	// Size sandboxes are kept started and ready.
	Size int
	// StartTimeout bounds starting one sandbox.
	StartTimeout time.Duration
}

// Pool is where sessions get their sandboxes: a ready one from the warm
// pool when there is one, else one started for them.
type Pool struct {
	cfg     PoolConfig
	metrics *metrics.Metrics
	logger  *slog.Logger
	ready   chan *sandbox.Sandbox
	wake    chan struct{}
}

// NewPool returns a pool; Run fills it.
func NewPool(cfg PoolConfig, m *metrics.Metrics, logger *slog.Logger) *Pool {
	p := &Pool{cfg: cfg, metrics: m, logger: logger, ready: make(chan *sandbox.Sandbox, max(cfg.Size, 0)), wake: make(chan struct{}, 1)}
	m.PoolFunc(p.Len)
	return p
}

// Len is the number of ready sandboxes in the pool.
func (p *Pool) Len() int { return len(p.ready) }

// Take returns a ready sandbox for a session of tenant: a pooled one
// when available, unless the tenant has mounts of its own, which pooled
// sandboxes lack.
func (p *Pool) Take(ctx context.Context, tenant string) (*sandbox.Sandbox, error) {
	if own := p.cfg.TenantMounts[tenant]; len(own) > 0 {
		sb, err := p.start(ctx, false, own)
		if err != nil {
			p.metrics.StartFailed()
		}
		return sb, err
	}
	for {
		select {
		case sb := <-p.ready:
			if sb.Alive() {
				p.metrics.PoolHit()
				sb.SetAfterFirstExec(p.deferredWake())
				return sb, nil
			}
			p.wakeFiller()
			go sb.Kill()
			continue
		default:
		}
		break
	}
	p.wakeFiller()
	sb, err := p.start(ctx, false, nil)
	if err != nil {
		p.metrics.StartFailed()
	}
	return sb, err
}

// start starts a sandbox for a session, or for the pool when warm
// (engine.Spec.Warm: the engine may then wait for a cheaper way to start
// it), with the operator's mounts and then own.
func (p *Pool) start(ctx context.Context, warm bool, own []engine.Mount) (*sandbox.Sandbox, error) {
	id := "cx-" + randomid.Hex(6)
	spec := engine.Spec{
		ID:       id,
		Labels:   map[string]string{"codeexec.sandbox": id},
		AgentDir: p.cfg.AgentDir,
		Argv:     p.cfg.Argv,
		Env:      p.cfg.Env,
		Limits:   p.cfg.Limits,
		Mounts:   append(slices.Clip(p.cfg.Mounts), own...),
		Warm:     warm,
	}
	start := time.Now()
	sb, err := sandbox.Start(ctx, p.cfg.Engine, spec, p.logger)
	if err != nil {
		return nil, fmt.Errorf("start %s sandbox: %w", p.cfg.Engine.Name(), err)
	}
	p.metrics.Started(warm, time.Since(start))
	return sb, nil
}

// poolRefillDelay bounds how long deferredWake waits.
const poolRefillDelay = 100 * time.Millisecond

// deferredWake returns a function that wakes the pool filler the first time
// it is called, and calls it itself after poolRefillDelay. A session that
// takes a pooled sandbox calls it when its first exec is done: refilling at
// once would start a sandbox (several milliseconds of a CPU for Python's
// start-up) while that exec runs, which on a small machine slows the very
// call the pool is there to make fast.
func (p *Pool) deferredWake() func() {
	var once sync.Once
	wake := func() { once.Do(p.wakeFiller) }
	time.AfterFunc(poolRefillDelay, wake)
	return wake
}

func (p *Pool) wakeFiller() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run keeps the pool full until ctx ends. After a failed start it backs
// off, so a broken runtime does not spin.
func (p *Pool) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for {
		for len(p.ready) < cap(p.ready) {
			if !p.fillOne(ctx, &backoff) {
				return
			}
		}
		select {
		case <-p.wake:
		case <-ctx.Done():
			return
		}
	}
}

// fillOne starts, warms up and pools one sandbox, backing off after a
// failed start; false means ctx ended (sandboxd's Close).
func (p *Pool) fillOne(ctx context.Context, backoff *time.Duration) bool {
	startCtx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	sb, err := p.start(startCtx, true, nil)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return false // sandboxd's Close: not a failed start
		}
		p.metrics.StartFailed()
		p.logger.Warn("warm pool could not start a sandbox", logkeys.Error, err)
		select {
		case <-time.After(*backoff):
		case <-ctx.Done():
			return false
		}
		*backoff = min(*backoff*2, 30*time.Second)
		return true
	}
	*backoff = 100 * time.Millisecond
	warmCtx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	err = sb.WarmUp(warmCtx)
	cancel()
	if err != nil {
		go sb.Kill()
		if ctx.Err() != nil {
			return false // sandboxd's Close: not a failed warm-up
		}
		p.logger.Warn("warm pool sandbox failed its warm-up", logkeys.Error, err)
		return true
	}
	select {
	case p.ready <- sb:
	default:
		go sb.Kill()
	}
	return true
}

// Close kills the pooled sandboxes and waits for them.
func (p *Pool) Close() {
	var wg sync.WaitGroup
	for {
		select {
		case sb := <-p.ready:
			wg.Go(sb.Kill)
			continue
		default:
		}
		break
	}
	wg.Wait()
}
