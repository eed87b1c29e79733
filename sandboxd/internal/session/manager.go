// Package session keeps sandbox sessions: persistent Python interpreters,
// each served by one sandbox at a time, and the sequence of a call on one
// (Execute). The sandbox itself is package sandbox's; a session's hold on
// the session store, package lease's; how many sandboxes run and which,
// package capacity's. A Manager holds the sessions of one sandboxd.
package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/capacity"
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/lease"
	"github.com/codeexec/codeexec/sandboxd/internal/metrics"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
)

// Errors returned by the manager; the service maps them to gRPC codes.
var (
	ErrNotFound = errors.New("session not found")
	ErrInvalid  = errors.New("invalid argument")
	ErrExists   = errors.New("session exists")
	// ErrExhausted means there is no room for the session or its sandbox.
	ErrExhausted = capacity.ErrExhausted
	// ErrPaused means that a fence holds the session (lease.Fence).
	ErrPaused = lease.ErrPaused
)

// ElsewhereError says that the session is live on another replica.
type ElsewhereError struct {
	Replica, Address string
}

func (e *ElsewhereError) Error() string {
	return fmt.Sprintf("the session is live on sandbox replica %s (%s)", e.Replica, e.Address)
}

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
	// Results bounds output and images for a model (sandbox/results.go).
	Results sandbox.Results
	// Mounts are the operator's host directories, in every sandbox;
	// TenantMounts those of one tenant's sandboxes (capacity.PoolConfig).
	Mounts       []engine.Mount
	TenantMounts map[string][]engine.Mount
	// DefaultTimeout and MaxTimeout bound each exec.
	DefaultTimeout, MaxTimeout time.Duration
	// StartTimeout bounds starting one sandbox.
	StartTimeout time.Duration
	// IdleTimeout reaps sessions unused for that long; zero disables it.
	IdleTimeout time.Duration
	// PoolSize sandboxes are kept started and ready.
	PoolSize int
	// MaxSessions caps live sessions; zero means no cap. With Durable it
	// caps live sandboxes instead: sessions are records, and when every
	// sandbox is taken the one idle longest is checkpointed and stopped to
	// make room.
	MaxSessions int
	Metrics     *metrics.Metrics
	// Durable, when set, keeps sessions in the session store.
	Durable *Durability
}

// Durability makes sessions outlive their sandboxes (see package lease):
// each exec is followed by a checkpoint of the session's namespace, taken
// by the agent after the result is out and stored in the session store;
// a session whose sandbox is gone gets a fresh one with the checkpoint
// restored into it, on this replica or any other.
type Durability struct {
	Store *lease.Store
	// CheckpointBytes caps one checkpoint; a larger state is reported as
	// not durable.
	CheckpointBytes int64
	// EnvChange says what changed from the environment a checkpoint was
	// made in (its ID) to this replica's, or "" when nothing did; nil
	// says nothing.
	EnvChange func(from string) string
	// WorkspaceBytes caps the bytes of /workspace's files a checkpoint
	// holds on top of CheckpointBytes; files over it are named, not
	// kept. Zero keeps no files.
	WorkspaceBytes int64
}

// storeCap is the most bytes of chunks one session holds in the store:
// its values and its files.
func (d *Durability) storeCap() int64 { return d.CheckpointBytes + d.WorkspaceBytes }

// DefaultCheckpointBytes is the default cap on a checkpoint. It is the
// suite's gRPC message limit: far above what a notebook-style session
// holds (a checkpoint keeps only what changed, and values once), an eighth
// of the default sandbox memory, and small enough that storing and
// restoring it stays under a second.
const DefaultCheckpointBytes = 64 << 20

// Manager owns every session of one sandboxd.
type Manager struct {
	cfg     Config
	logger  *slog.Logger
	metrics *metrics.Metrics
	pool    *capacity.Pool
	room    *capacity.Room
	// fence holds the sessions while the replica's lease may lapse (nil
	// without a store).
	fence *lease.Fence

	mu       sync.Mutex
	sessions map[string]*Session
	// claimMu makes one claim of a session from the store at a time, so
	// that two calls for one handle get one Session.
	claimMu sync.Mutex

	stop  context.CancelFunc
	loops sync.WaitGroup
	// closing is set once Close began: the runs it stops are
	// interrupted, not ended (their mark in the store stays).
	closing atomic.Bool
}

// NewManager starts the pool filler, the reaper and, with a store, the
// replica's heartbeat and its fence; they stop with Close.
func NewManager(ctx context.Context, cfg Config, logger *slog.Logger) (*Manager, error) {
	if cfg.Engine == nil || cfg.Broker == nil || len(cfg.Argv) == 0 {
		return nil, errors.New("session: Engine, Broker and Argv are required")
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(nil)
	}
	ctx, cancel := context.WithCancel(ctx)
	m := &Manager{cfg: cfg, logger: logger, metrics: cfg.Metrics, sessions: map[string]*Session{}, stop: cancel}
	m.metrics.SessionsFunc(m.count)
	m.pool = capacity.NewPool(capacity.PoolConfig{
		Engine: cfg.Engine, AgentDir: cfg.AgentDir, Argv: cfg.Argv, Env: cfg.Env, Limits: cfg.Limits, Mounts: cfg.Mounts, TenantMounts: cfg.TenantMounts,
		Size: cfg.PoolSize, StartTimeout: cfg.StartTimeout,
	}, m.metrics, logger)
	m.room = capacity.NewRoom(cfg.MaxSessions, cfg.Durable != nil, m.capacitySessions, m.metrics, logger)
	if cfg.PoolSize > 0 {
		m.loop(ctx, m.pool.Run)
	}
	if cfg.IdleTimeout > 0 {
		r := &capacity.Reaper{Idle: cfg.IdleTimeout, Durable: cfg.Durable != nil, Sessions: m.capacitySessions, Metrics: m.metrics, Logger: logger}
		m.loop(ctx, r.Run)
	}
	if d := cfg.Durable; d != nil {
		if d.CheckpointBytes <= 0 {
			d.CheckpointBytes = DefaultCheckpointBytes
		}
		m.fence = lease.NewFence(d.Store.Replica(), m.leases, logger)
		m.loop(ctx, m.fence.Run)
		m.fence.Start(ctx)
		m.loop(ctx, d.Store.Sweep)
	}
	return m, nil
}

// loop runs f on a goroutine that Close waits for.
func (m *Manager) loop(ctx context.Context, f func(context.Context)) {
	m.loops.Go(func() { f(ctx) })
}

// Close stops every sandbox and pooled sandbox. Durable sessions are kept:
// their checkpoints stored, they are given up for any replica to take;
// the others are destroyed.
func (m *Manager) Close() {
	m.stop()
	m.loops.Wait()
	m.closing.Store(true)
	var wg sync.WaitGroup
	for _, s := range m.all() {
		// A run in flight would hold its sandbox (and its checkpoint
		// pending) until its timeout, an hour perhaps: it stops now, and
		// the next holder says it was interrupted.
		if f := s.inFlight(); f != nil {
			f.Cancel(&sandbox.CancelledError{Why: "the run was interrupted: its sandbox service was stopped"})
		}
		wg.Go(func() {
			if s.lease != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				s.giveUp(ctx, "its sandbox service was stopped")
				return
			}
			s.destroy()
		})
	}
	defer func() {
		if d := m.cfg.Durable; d != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			d.Store.Replica().Stop(ctx)
		}
	}()
	m.mu.Lock()
	m.sessions = map[string]*Session{}
	m.mu.Unlock()
	m.pool.Close()
	wg.Wait()
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

// count is the number of live sessions.
func (m *Manager) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

// all lists the live sessions.
func (m *Manager) all() []*Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	all := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	return all
}

// capacitySessions lists the live sessions, for capacity.
func (m *Manager) capacitySessions() []capacity.Session {
	all := m.all()
	out := make([]capacity.Session, len(all))
	for i, s := range all {
		out[i] = s
	}
	return out
}

// leases lists the leases of the live sessions the store holds, for the
// fence.
func (m *Manager) leases() []*lease.Lease {
	var out []*lease.Lease
	for _, s := range m.all() {
		if s.lease != nil {
			out = append(out, s.lease)
		}
	}
	return out
}

// current reports whether s is still the manager's session of its ID.
func (m *Manager) current(s *Session) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sessions[s.id] == s
}

// forget drops s from the manager, if it is still the session of its ID.
func (m *Manager) forget(s *Session) {
	m.mu.Lock()
	if m.sessions[s.id] == s {
		delete(m.sessions, s.id)
	}
	m.mu.Unlock()
	// Calls held by a fence go on, and take the session from the store.
	s.lease.EndHold()
}
