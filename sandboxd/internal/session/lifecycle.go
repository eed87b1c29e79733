package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/codeexec/codeexec/sandboxd/internal/lease"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Create makes a new session. Its sandbox starts on first use (from the
// pool when one is ready). A durable session's handle is its ID. id, when
// not empty, is the ID it takes (32 lowercase hex digits); a session that
// has it already, live here or in the store, is ErrExists and is left
// alone.
func (m *Manager) Create(ctx context.Context, tenant, id string, labels map[string]string) (Info, error) {
	tenant = cmp.Or(tenant, "default")
	if id != "" {
		if !isID(id) {
			return Info{}, fmt.Errorf("%w: session_id %q is not a session ID: give 32 lowercase hex digits, or none for a random one", ErrInvalid, id)
		}
		if m.has(id) {
			return Info{}, fmt.Errorf("%w: session %q", ErrExists, id)
		}
	}
	s, err := m.record(ctx, tenant, id, labels)
	if err != nil {
		return Info{}, err
	}
	m.mu.Lock()
	if err := m.room.Admit(len(m.sessions)); err != nil {
		m.mu.Unlock()
		return Info{}, err
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

// record makes a new session, recorded in the store when there is one.
func (m *Manager) record(ctx context.Context, tenant, id string, labels map[string]string) (*Session, error) {
	d := m.cfg.Durable
	if d == nil {
		return m.newSession(cmp.Or(id, lease.NewHandle()), tenant, labels, nil), nil
	}
	l, err := d.Store.CreateAs(ctx, tenant, cmp.Or(id, lease.NewHandle()), labels)
	switch {
	case errors.Is(err, lease.ErrExists):
		return nil, fmt.Errorf("%w: session %q", ErrExists, id)
	case err != nil:
		// The session works without the store; it only cannot come
		// back if its sandbox stops, and the first result says so.
		// A chosen ID is not taken then: the store may hold a
		// session of that ID that this one would hide.
		m.logger.WarnContext(ctx, "the session store did not record a new session; it is not durable", logkeys.Error, err)
		s := m.newSession(lease.NewHandle(), tenant, labels, nil)
		s.unrecorded = "this session is not durable, so its state is lost if its sandbox stops: the session store did not record it (" + err.Error() + ")"
		return s, nil
	}
	return m.newSession(l.Handle, tenant, labels, l), nil
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
	tenant = cmp.Or(tenant, "default")
	m.mu.Lock()
	s, ok := m.sessions[id]
	m.mu.Unlock()
	if !ok || s.tenant != tenant {
		return nil, fmt.Errorf("%w: no session %q (it may have been reaped after being idle, or its sandboxd restarted)", ErrNotFound, id)
	}
	return s, nil
}

// List returns the sessions of a tenant ("" for all), oldest first.
func (m *Manager) List(tenant string) []Info {
	infos := []Info{}
	for _, s := range m.all() {
		if tenant == "" || s.tenant == tenant {
			infos = append(infos, s.Info())
		}
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Created.Before(infos[j].Created) })
	return infos
}

// claim returns a session to run a call on: the live one here, or, for a
// durable session, the one the store holds, taken for this replica. It
// fails with an *ElsewhereError when another replica holds it live.
func (m *Manager) claim(ctx context.Context, tenant, id string) (*Session, error) {
	s, err := m.Get(tenant, id)
	if err == nil || m.cfg.Durable == nil {
		return s, err
	}
	tenant = cmp.Or(tenant, "default")
	m.claimMu.Lock()
	defer m.claimMu.Unlock()
	if s, err := m.Get(tenant, id); err == nil {
		return s, nil
	}
	if m.has(id) {
		return nil, fmt.Errorf("%w: unknown session %q", ErrNotFound, id)
	}
	l, err := m.cfg.Durable.Store.Claim(ctx, tenant, id)
	var elsewhere *lease.ElsewhereError
	switch {
	case errors.Is(err, lease.ErrUnknown):
		return nil, fmt.Errorf("%w: unknown session %q", ErrNotFound, id)
	case errors.As(err, &elsewhere):
		return nil, &ElsewhereError{Replica: elsewhere.Replica, Address: elsewhere.Address}
	case err != nil:
		return nil, err
	}
	s = m.newSession(id, tenant, l.State.Labels, l)
	m.mu.Lock()
	m.sessions[id] = s
	m.mu.Unlock()
	m.logger.InfoContext(ctx, "session taken from the session store", logkeys.SessionID, id, logkeys.Tenant, tenant, "reason", l.LossReason())
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
	tenant = cmp.Or(tenant, "default")
	if s != nil {
		m.forget(s)
		if sb := s.destroy(); sb != nil && s.lease != nil {
			// What its committer still stores must not land after the
			// delete, where nothing would ever remove it.
			s.waitCommitter(sb)
		}
	} else if d != nil {
		// Its holder must stop its sandbox, or it would run on without
		// a record: the caller follows the answer there.
		if where, err := d.Store.Holder(ctx, tenant, id); err != nil {
			return err
		} else if where != nil {
			return &ElsewhereError{Replica: where.Replica, Address: where.Address}
		}
	}
	if d != nil {
		deleted, err := d.Store.Delete(ctx, tenant, id)
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
	if s.lease == nil {
		s.stopSandbox()
		return s.Info(), nil
	}
	s.lease.WaitCommits(m.cfg.StartTimeout)
	if sb := s.stopSandbox(); sb != nil {
		s.waitCommitter(sb)
	}
	// The session's turn is held and its committer gone: nothing else
	// writes its record now.
	err = s.lease.Clear(ctx, s.Info().ExecCount)
	if errors.Is(err, lease.ErrLost) {
		m.forget(s)
		return Info{}, fmt.Errorf("%w: session %s was taken over by another sandbox replica meanwhile; reset it again", ErrNotFound, s.id)
	}
	if err != nil {
		return Info{}, fmt.Errorf("clear the session's checkpoint: %w", err)
	}
	return s.Info(), nil
}
