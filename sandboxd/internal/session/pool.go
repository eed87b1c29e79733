package session

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/randomid"
)

// takeSandbox returns a ready sandbox: a pooled one when available.
func (m *Manager) takeSandbox(ctx context.Context) (*sandbox, error) {
	for {
		select {
		case sb := <-m.pool:
			if sb.alive() {
				m.metrics.poolHit()
				sb.mu.Lock()
				sb.afterFirstExec = m.deferredWake()
				sb.mu.Unlock()
				return sb, nil
			}
			m.wakePool()
			go sb.kill()
			continue
		default:
		}
		break
	}
	m.wakePool()
	sb, err := m.startSandbox(ctx, false)
	if err != nil {
		m.metrics.startFailed()
	}
	return sb, err
}

// startSandbox starts a sandbox for a session, or for the pool when warm
// (engine.Spec.Warm: the engine may then wait for a cheaper way to start
// it).
func (m *Manager) startSandbox(ctx context.Context, warm bool) (*sandbox, error) {
	id := "cx-" + randomid.Hex(6)
	spec := engine.Spec{
		ID:       id,
		Labels:   map[string]string{"codeexec.sandbox": id},
		AgentDir: m.cfg.AgentDir,
		Argv:     m.cfg.Argv,
		Env:      m.cfg.Env,
		Limits:   m.cfg.Limits,
		Mounts:   m.cfg.Mounts,
		Warm:     warm,
	}
	start := time.Now()
	sb, err := startSandbox(ctx, m.cfg.Engine, spec, m.logger)
	if err != nil {
		return nil, fmt.Errorf("start %s sandbox: %w", m.cfg.Engine.Name(), err)
	}
	m.metrics.started(warm, time.Since(start))
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
func (m *Manager) deferredWake() func() {
	var once sync.Once
	wake := func() { once.Do(m.wakePool) }
	time.AfterFunc(poolRefillDelay, wake)
	return wake
}

func (m *Manager) wakePool() {
	select {
	case m.poolWake <- struct{}{}:
	default:
	}
}

// fillPool keeps the pool full. After a failed start it backs off, so a
// broken runtime does not spin.
func (m *Manager) fillPool(ctx context.Context) {
	defer m.loops.Done()
	backoff := 100 * time.Millisecond
	for {
		for len(m.pool) < cap(m.pool) {
			startCtx, cancel := context.WithTimeout(ctx, m.cfg.StartTimeout)
			sb, err := m.startSandbox(startCtx, true)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return // sandboxd's Close: not a failed start
				}
				m.metrics.startFailed()
				m.logger.Warn("warm pool could not start a sandbox", logkeys.Error, err)
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
					return
				}
				backoff = min(backoff*2, 30*time.Second)
				continue
			}
			backoff = 100 * time.Millisecond
			if err := m.warmUp(ctx, sb); err != nil {
				go sb.kill()
				if ctx.Err() != nil {
					return // sandboxd's Close: not a failed warm-up
				}
				m.logger.Warn("warm pool sandbox failed its warm-up", logkeys.Error, err)
				continue
			}
			select {
			case m.pool <- sb:
			default:
				go sb.kill()
			}
		}
		select {
		case <-m.poolWake:
		case <-ctx.Done():
			return
		}
	}
}

// warmUp runs one empty exec so that the agent's one-time setup is done
// before a session takes the sandbox: a pooled sandbox's first real exec is
// then as fast as any later one.
func (m *Manager) warmUp(ctx context.Context, sb *sandbox) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StartTimeout)
	defer cancel()
	sb.mu.Lock()
	sb.nextExec++
	id := sb.nextExec
	sb.mu.Unlock()
	if err := sendExec(sb, id, "pass", &ExecEnv{}, 0, false, nil, 0, Results{}); err != nil {
		return err
	}
	for {
		select {
		case msg := <-sb.msgs:
			if done, ok := msg.(*channel.Done); ok && done.Exec == id {
				if !done.OK {
					return fmt.Errorf("warm-up exec failed: %s", done.Error)
				}
				return nil
			}
		case <-sb.dead:
			return fmt.Errorf("sandbox died during warm-up: %s", sb.describeDeath())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
