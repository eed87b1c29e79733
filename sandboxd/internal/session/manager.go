// Package session keeps sandbox sessions: persistent Python interpreters,
// each served by one sandbox at a time, with a warm pool of ready
// sandboxes and a reaper for idle sessions.
package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/durable"
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Errors returned by the manager; the service maps them to gRPC codes.
var (
	ErrNotFound  = errors.New("session not found")
	ErrInvalid   = errors.New("invalid argument")
	ErrExhausted = errors.New("resource exhausted")
	ErrExists    = errors.New("session exists")
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
	// Results bounds output and images for a model (results.go).
	Results Results
	// Mounts are the operator's host directories, in every sandbox.
	Mounts []engine.Mount
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
	Metrics     *Metrics
	// Durable, when set, keeps sessions in the session store.
	Durable *Durability
}

// Manager owns every session of one sandboxd.
type Manager struct {
	cfg     Config
	logger  *slog.Logger
	metrics *Metrics

	mu       sync.Mutex
	sessions map[string]*Session
	// claimMu makes one claim of a session from the store at a time, so
	// that two calls for one handle get one Session.
	claimMu sync.Mutex
	// room counts the places of sandboxes that belong to sessions (on mu;
	// see room.go).
	room room

	// fencing is set (on mu) from a fence until every held session is
	// settled; fenceGen counts the fences; fence settles (fence.go).
	fencing  bool
	fenceGen uint64
	fence    fenceWorker

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
		room:     room{wake: make(chan struct{})},
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
	if d := cfg.Durable; d != nil {
		if d.CheckpointBytes <= 0 {
			d.CheckpointBytes = DefaultCheckpointBytes
		}
		m.fence.wake = make(chan struct{}, 1)
		m.loops.Add(1)
		go m.runFenceWorker(ctx)
		d.Replica.Start(ctx, m.fenced, m.renewed)
		m.loops.Add(1)
		go m.expire(ctx)
	}
	return m, nil
}

// expireEvery spaces the sweeps of expired sessions out of the store.
const expireEvery = 10 * time.Minute

// Close stops every sandbox and pooled sandbox. Durable sessions are kept:
// their checkpoints stored, they are given up for any replica to take;
// the others are destroyed.
func (m *Manager) Close() {
	m.stop()
	m.loops.Wait()
	m.mu.Lock()
	all := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.isDurable() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				m.release(ctx, s, "its sandbox service was stopped")
				return
			}
			s.destroy()
		}()
	}
	defer func() {
		if d := m.cfg.Durable; d != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			d.Replica.Stop(ctx)
		}
	}()
	m.mu.Lock()
	m.sessions = map[string]*Session{}
	m.mu.Unlock()
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
// pool when one is ready). A durable session's handle is its ID. id, when
// not empty, is the ID it takes (32 lowercase hex digits); a session that
// has it already, live here or in the store, is ErrExists and is left
// alone.
func (m *Manager) Create(ctx context.Context, tenant, id string, labels map[string]string) (Info, error) {
	if tenant == "" {
		tenant = "default"
	}
	if id != "" {
		if !isID(id) {
			return Info{}, fmt.Errorf("%w: session_id %q is not a session ID: give 32 lowercase hex digits, or none for a random one", ErrInvalid, id)
		}
		if m.has(id) {
			return Info{}, fmt.Errorf("%w: session %q", ErrExists, id)
		}
	}
	var s *Session
	if d := m.cfg.Durable; d != nil {
		handle := cmp.Or(id, durable.NewHandle())
		held, err := d.Sessions.CreateAs(ctx, tenant, handle, labels)
		switch {
		case errors.Is(err, durable.ErrExists):
			return Info{}, fmt.Errorf("%w: session %q", ErrExists, id)
		case err != nil:
			// The session works without the store; it only cannot come
			// back if its sandbox stops, and the first result says so.
			// A chosen ID is not taken then: the store may hold a
			// session of that ID that this one would hide.
			m.logger.WarnContext(ctx, "the session store did not record a new session; it is not durable", logkeys.Error, err)
			s = m.newSession(durable.NewHandle(), tenant, labels, nil)
			s.d.notDurable = "this session is not durable, so its state is lost if its sandbox stops: the session store did not record it (" + err.Error() + ")"
		default:
			s = m.newSession(held.Handle, tenant, labels, held)
			s.d.reason = ""
		}
	} else {
		s = m.newSession(cmp.Or(id, durable.NewHandle()), tenant, labels, nil)
	}
	m.mu.Lock()
	if m.cfg.Durable == nil && m.cfg.MaxSessions > 0 && len(m.sessions) >= m.cfg.MaxSessions {
		m.mu.Unlock()
		return Info{}, fmt.Errorf("%w: %d sessions are live, the maximum (raise CODEEXEC_MAX_SESSIONS or end idle sessions)", ErrExhausted, m.cfg.MaxSessions)
	}
	if _, ok := m.sessions[s.id]; ok {
		// Created meanwhile by another call with the same ID.
		m.mu.Unlock()
		return Info{}, fmt.Errorf("%w: session %q", ErrExists, s.id)
	}
	m.sessions[s.id] = s
	m.mu.Unlock()
	m.logger.InfoContext(ctx, "session created", logkeys.SessionID, s.id, logkeys.Tenant, tenant)
	return s.Info(), nil
}

// has reports whether a session with the ID is live here, for any tenant.
func (m *Manager) has(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.sessions[id]
	return ok
}

// isID reports whether id has the form of a generated session ID.
func isID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range []byte(id) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
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

// Destroy ends a session for good: its sandbox stops, and a durable
// session's record and checkpoint are deleted. A durable session live on
// another replica is ended there: the error is an *ElsewhereError.
func (m *Manager) Destroy(ctx context.Context, tenant, id string) error {
	s, err := m.Get(tenant, id)
	d := m.cfg.Durable
	if err != nil && d == nil {
		return err
	}
	if tenant == "" {
		tenant = "default"
	}
	if s != nil {
		m.forget(s)
		if sb := s.destroy(); sb != nil && s.isDurable() {
			// What its committer still stores must not land after the
			// delete, where nothing would ever remove it.
			m.waitCommitter(s, sb)
		}
	} else if d != nil {
		// Its holder must stop its sandbox, or it would run on without
		// a record: the caller follows the answer there.
		if where, err := d.Sessions.Holder(ctx, tenant, id); err != nil {
			return err
		} else if where != nil {
			return &ElsewhereError{Replica: where.Replica, Address: where.Address}
		}
	}
	if d != nil {
		deleted, err := d.Sessions.Delete(ctx, tenant, id)
		if err != nil {
			return err
		}
		if !deleted && s == nil {
			return fmt.Errorf("%w: unknown session %q", ErrNotFound, id)
		}
	}
	m.logger.InfoContext(ctx, "session destroyed", logkeys.SessionID, id)
	return nil
}

// Reset drops a session's interpreter state; the next exec starts fresh.
// A durable session's checkpoint goes too, wherever the session was: a
// session live on another replica is reset there (an *ElsewhereError).
func (m *Manager) Reset(ctx context.Context, tenant, id string) (Info, error) {
	s, err := m.claim(ctx, tenant, id)
	if err != nil {
		return Info{}, err
	}
	if err := s.acquire(ctx); err != nil {
		return Info{}, err
	}
	defer s.release()
	durable := s.isDurable()
	if durable {
		s.waitCommit(m.cfg.StartTimeout)
	}
	sb := s.stopSandbox()
	if !durable {
		return s.Info(), nil
	}
	if sb != nil {
		m.waitCommitter(s, sb)
	}
	if err := m.clearCheckpoint(ctx, s); err != nil {
		return Info{}, err
	}
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

// claim returns a session to run a call on: the live one here, or, for a
// durable session, the one the store holds, taken for this replica. It
// fails with an *ElsewhereError when another replica holds it live.
func (m *Manager) claim(ctx context.Context, tenant, id string) (*Session, error) {
	s, err := m.Get(tenant, id)
	if err == nil || m.cfg.Durable == nil {
		return s, err
	}
	if tenant == "" {
		tenant = "default"
	}
	m.claimMu.Lock()
	defer m.claimMu.Unlock()
	if s, err := m.Get(tenant, id); err == nil {
		return s, nil
	}
	m.mu.Lock()
	_, other := m.sessions[id]
	m.mu.Unlock()
	if other {
		return nil, fmt.Errorf("%w: unknown session %q", ErrNotFound, id)
	}
	held, err := m.cfg.Durable.Sessions.Claim(ctx, tenant, id)
	var elsewhere *durable.ElsewhereError
	switch {
	case errors.Is(err, durable.ErrUnknown):
		return nil, fmt.Errorf("%w: unknown session %q", ErrNotFound, id)
	case errors.As(err, &elsewhere):
		return nil, &ElsewhereError{Replica: elsewhere.Replica, Address: elsewhere.Address}
	case err != nil:
		return nil, err
	}
	s = m.newSession(id, tenant, held.State.Labels, held)
	m.mu.Lock()
	m.sessions[id] = s
	m.mu.Unlock()
	m.logger.InfoContext(ctx, "session taken from the session store", logkeys.SessionID, id, logkeys.Tenant, tenant, "reason", s.d.reason)
	return s, nil
}
