// Package session keeps sandbox sessions: persistent Python interpreters,
// each served by one sandbox at a time, with a warm pool of ready
// sandboxes and a reaper for idle sessions.
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Errors returned by the manager; the service maps them to gRPC codes.
var (
	ErrNotFound  = errors.New("session not found")
	ErrInvalid   = errors.New("invalid argument")
	ErrExhausted = errors.New("resource exhausted")
)

// Config configures a Manager.
type Config struct {
	Engine engine.Engine
	Broker Broker
	// AgentDir holds the agent's files on the host; Argv runs it.
	AgentDir string
	Argv     []string
	Env      map[string]string
	Limits   engine.Limits
	// OutputLimit caps the bytes of each output stream per exec.
	OutputLimit int64
	// DefaultTimeout and MaxTimeout bound each exec.
	DefaultTimeout, MaxTimeout time.Duration
	// StartTimeout bounds starting one sandbox.
	StartTimeout time.Duration
	// IdleTimeout reaps sessions unused for that long; zero disables it.
	IdleTimeout time.Duration
	// PoolSize sandboxes are kept started and ready.
	PoolSize int
	// MaxSessions caps live sessions; zero means no cap.
	MaxSessions int
	Metrics     *Metrics
}

// Manager owns every session of one sandboxd.
type Manager struct {
	cfg     Config
	logger  *slog.Logger
	metrics *Metrics

	mu       sync.Mutex
	sessions map[string]*Session

	pool     chan *sandbox
	poolWake chan struct{}
	stop     context.CancelFunc
	loops    sync.WaitGroup
}

// NewManager starts the pool filler and the reaper; they stop with Close.
func NewManager(ctx context.Context, cfg Config, logger *slog.Logger) (*Manager, error) {
	if cfg.Engine == nil || cfg.Broker == nil || len(cfg.Argv) == 0 {
		return nil, errors.New("session: Engine, Broker and Argv are required")
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	ctx, cancel := context.WithCancel(ctx)
	m := &Manager{
		cfg:      cfg,
		logger:   logger,
		metrics:  cfg.Metrics,
		sessions: map[string]*Session{},
		pool:     make(chan *sandbox, max(cfg.PoolSize, 0)),
		poolWake: make(chan struct{}, 1),
		stop:     cancel,
	}
	m.metrics.sessionsFunc(m.count)
	m.metrics.poolFunc(func() int { return len(m.pool) })
	if cfg.PoolSize > 0 {
		m.loops.Add(1)
		go m.fillPool(ctx)
	}
	if cfg.IdleTimeout > 0 {
		m.loops.Add(1)
		go m.reap(ctx)
	}
	return m, nil
}

// Close destroys every session and pooled sandbox.
func (m *Manager) Close() {
	m.stop()
	m.loops.Wait()
	m.mu.Lock()
	all := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.sessions = map[string]*Session{}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() { defer wg.Done(); s.destroy() }()
	}
	for {
		select {
		case sb := <-m.pool:
			wg.Add(1)
			go func() { defer wg.Done(); sb.kill() }()
			continue
		default:
		}
		break
	}
	wg.Wait()
}

func (m *Manager) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

// Create makes a new session. Its sandbox starts on first use (from the
// pool when one is ready).
func (m *Manager) Create(ctx context.Context, tenant string, labels map[string]string) (Info, error) {
	if tenant == "" {
		tenant = "default"
	}
	s := &Session{
		id: newID(), tenant: tenant, labels: labels, created: time.Now(), m: m,
		turn: make(chan struct{}, 1),
	}
	s.lastUsed = s.created
	m.mu.Lock()
	if m.cfg.MaxSessions > 0 && len(m.sessions) >= m.cfg.MaxSessions {
		m.mu.Unlock()
		return Info{}, fmt.Errorf("%w: %d sessions are live, the maximum (raise CODEEXEC_MAX_SESSIONS or end idle sessions)", ErrExhausted, m.cfg.MaxSessions)
	}
	m.sessions[s.id] = s
	m.mu.Unlock()
	m.logger.InfoContext(ctx, "session created", logkeys.SessionID, s.id, logkeys.Tenant, tenant)
	return s.Info(), nil
}

// Get finds a session of a tenant. Another tenant's session looks unknown.
func (m *Manager) Get(tenant, id string) (*Session, error) {
	if tenant == "" {
		tenant = "default"
	}
	m.mu.Lock()
	s, ok := m.sessions[id]
	m.mu.Unlock()
	if !ok || s.tenant != tenant {
		return nil, fmt.Errorf("%w: no session %q (it may have been reaped after being idle, or its sandboxd restarted)", ErrNotFound, id)
	}
	return s, nil
}

// Destroy stops a session and forgets it.
func (m *Manager) Destroy(ctx context.Context, tenant, id string) error {
	s, err := m.Get(tenant, id)
	if err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.sessions, id)
	m.mu.Unlock()
	s.destroy()
	m.logger.InfoContext(ctx, "session destroyed", logkeys.SessionID, id)
	return nil
}

// Reset drops a session's interpreter state; the next exec starts fresh.
func (m *Manager) Reset(ctx context.Context, tenant, id string) (Info, error) {
	s, err := m.Get(tenant, id)
	if err != nil {
		return Info{}, err
	}
	if err := s.acquire(ctx); err != nil {
		return Info{}, err
	}
	defer s.release()
	s.stopSandbox()
	return s.Info(), nil
}

// List returns the sessions of a tenant ("" for all), oldest first.
func (m *Manager) List(tenant string) []Info {
	m.mu.Lock()
	all := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		if tenant == "" || s.tenant == tenant {
			all = append(all, s)
		}
	}
	m.mu.Unlock()
	infos := make([]Info, 0, len(all))
	for _, s := range all {
		infos = append(infos, s.Info())
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Created.Before(infos[j].Created) })
	return infos
}

func (m *Manager) clampTimeout(t time.Duration) time.Duration {
	if t <= 0 {
		t = m.cfg.DefaultTimeout
	}
	if m.cfg.MaxTimeout > 0 && t > m.cfg.MaxTimeout {
		t = m.cfg.MaxTimeout
	}
	return max(t, time.Second)
}

// reap destroys sessions idle for longer than IdleTimeout.
func (m *Manager) reap(ctx context.Context) {
	defer m.loops.Done()
	tick := time.NewTicker(max(m.cfg.IdleTimeout/4, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cutoff := time.Now().Add(-m.cfg.IdleTimeout)
		m.mu.Lock()
		var idle []*Session
		for id, s := range m.sessions {
			s.mu.Lock()
			if !s.busy && s.lastUsed.Before(cutoff) {
				idle = append(idle, s)
				delete(m.sessions, id)
			}
			s.mu.Unlock()
		}
		m.mu.Unlock()
		for _, s := range idle {
			m.logger.Info("reaping idle session", logkeys.SessionID, s.id, "idle_for", time.Since(s.Info().LastUsed))
			s.destroy()
			m.metrics.reaped()
		}
	}
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
