// Package sessions maps MCP sessions to sandbox sessions: which sandbox
// session serves each MCP session, for each tenant, and which tenant owns
// each MCP session. Which replica holds a sandbox session is route's to
// answer. The map rebuilds itself: an MCP session over HTTP finds its
// sandbox session again by the handle HandleFor derives, and any other
// lost entry means a fresh sandbox session on the next call.
package sessions

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/gateway/internal/drain"
	"github.com/codeexec/codeexec/gateway/internal/quota"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/logkeys"
)

// LabelMCPSession is the sandbox session label that names the MCP session,
// so that operators can match the two in ListSessions.
const LabelMCPSession = "mcp.session"

// destroyTimeout bounds a DestroySession made on behalf of a session that
// has already ended, whose own context may be gone.
const destroyTimeout = 10 * time.Second

// errSessionEnded fails a call on an entry whose MCP session has ended.
var errSessionEnded = errors.New("the MCP session has ended")

// Table maps MCP session IDs to sandbox sessions. The routing it
// holds is all the state the gateway has, and it rebuilds itself: a lost
// entry just means a fresh sandbox session on the next call.
//
// Entries are keyed by tenant and MCP session ID together, so a tenant that
// learns (or guesses) another tenant's MCP session ID still reaches only its
// own sandbox sessions.
type Table struct {
	client sandboxv1.SandboxServiceClient
	logger *slog.Logger
	// admit admits each new sandbox session against the tenant's
	// sessions quota (nil: no cap).
	admit *quota.Sessions

	mu      sync.Mutex
	closed  bool
	entries map[key]*Entry
	// live counts each tenant's sandbox sessions, created or being created.
	live map[string]int
	// known holds the MCP sessions this process saw start. A call from any
	// other session comes from a client of an earlier gateway process,
	// whose sandbox session (and state) this one cannot reach.
	known map[string]bool
}

// key identifies an entry: one tenant's view of one MCP session.
type key struct{ tenant, mcpID string }

// Entry is one MCP session's sandbox session, for one tenant. Its mutex
// serialises creation, so concurrent first calls share one sandbox session.
type Entry struct {
	// Tenant owns the sandbox session.
	Tenant string
	mcpID  string
	// derived says that the sandbox session's handle is HandleFor's (an
	// MCP session over HTTP), so that it outlives this gateway.
	derived bool

	mu        sync.Mutex
	sandboxID string
	ended     bool
	// handed says that the sandbox session's handle was given to the
	// client (MCP 2026-07-28), which may continue it from any process
	// until its TTL: ending the MCP session then forgets the entry but
	// leaves the sandbox session alone.
	handed bool
	// Generation tracking, to notice a sandbox that was replaced between
	// calls without the gateway being told (see Observe).
	genKnown      bool
	gen           uint64
	lastStateLost bool
}

// NewTable returns an empty table that creates and ends sandbox sessions
// through client, which reaches the replica that holds each (a
// route.Router); admit admits each new one against its tenant's sessions
// quota (nil: no cap).
func NewTable(client sandboxv1.SandboxServiceClient, admit *quota.Sessions, logger *slog.Logger) *Table {
	return &Table{client: client, logger: logger, admit: admit,
		entries: map[key]*Entry{}, live: map[string]int{}, known: map[string]bool{}}
}

// Admit runs create, which makes a sandbox session of tenant's outside any
// MCP session (a 2026-07-28 call without a session), within the tenant's
// sessions quota.
func (t *Table) Admit(ctx context.Context, tenant string, create func() error) error {
	return t.admit.Admit(ctx, tenant, t.held(tenant), create)
}

// held is the tenant's sandbox sessions this table made and holds.
func (t *Table) held(tenant string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live[tenant]
}

// Started records that an MCP session began in this process.
func (t *Table) Started(mcpID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.known[mcpID] = true
}

// IsKnown reports whether an MCP session began in this process.
func (t *Table) IsKnown(mcpID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.known[mcpID]
}

// Entry returns a tenant's entry for an MCP session, adding it if needed.
// derived, for an MCP session over HTTP, gives its sandbox session the
// handle HandleFor derives: a session of that handle that exists already
// (from before a restart, or made through another gateway) is continued.
// Once the table is closed it refuses with drain.ErrDraining.
func (t *Table) Entry(tenant, mcpID string, derived bool) (*Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, drain.ErrDraining
	}
	k := key{tenant, mcpID}
	e, ok := t.entries[k]
	if !ok {
		e = &Entry{Tenant: tenant, mcpID: mcpID, derived: derived}
		t.entries[k] = e
	}
	return e, nil
}

// reserve counts a sandbox session of the tenant's (admitted by the
// quota).
func (t *Table) reserve(tenant string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.live[tenant]++
}

// release undoes reserve.
func (t *Table) release(tenant string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live[tenant]--; t.live[tenant] <= 0 {
		delete(t.live, tenant)
	}
}

// SandboxID returns the entry's sandbox session, creating it on first use;
// created says whether it did (false for a derived handle's session that
// existed already).
func (t *Table) SandboxID(ctx context.Context, e *Entry) (id string, created bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return "", false, errSessionEnded
	}
	if e.sandboxID != "" {
		return e.sandboxID, false, nil
	}
	return t.createLocked(ctx, e)
}

// Replace swaps a sandbox session that sandboxd no longer knows (NotFound,
// e.g. after a sandboxd restart) for a new one. If another call already
// replaced it, that replacement is used.
func (t *Table) Replace(ctx context.Context, e *Entry, stale string) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return "", errSessionEnded
	}
	if e.sandboxID != stale && e.sandboxID != "" {
		return e.sandboxID, nil
	}
	t.logger.WarnContext(ctx, "sandbox session lost; creating a new one",
		logkeys.MCPSession, e.mcpID, logkeys.SessionID, stale)
	if e.sandboxID != "" {
		t.release(e.Tenant) // the lost session no longer counts
	}
	e.sandboxID, e.genKnown = "", false
	id, _, err := t.createLocked(ctx, e)
	return id, err
}

// Ended forgets the sandbox session sandboxID, which its code ended: the
// MCP session's next call starts a new one, with no "session lost".
func (t *Table) Ended(e *Entry, sandboxID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sandboxID != sandboxID {
		return
	}
	t.release(e.Tenant)
	e.sandboxID, e.genKnown = "", false
}

// createLocked gives e a sandbox session: a new one (created), or, for a
// derived handle, the one that has it already.
func (t *Table) createLocked(ctx context.Context, e *Entry) (id string, created bool, err error) {
	err = t.admit.Admit(ctx, e.Tenant, t.held(e.Tenant), func() error {
		id, created, err = t.create(ctx, e)
		return err
	})
	return id, created, err
}

// create makes e's sandbox session, admitted by the quota.
func (t *Table) create(ctx context.Context, e *Entry) (id string, created bool, err error) {
	t.reserve(e.Tenant)
	req := &sandboxv1.CreateSessionRequest{
		Tenant: e.Tenant,
		Labels: map[string]string{LabelMCPSession: e.mcpID},
	}
	if e.derived {
		req.SessionId = HandleFor(e.Tenant, e.mcpID)
	}
	resp, err := t.client.CreateSession(ctx, req)
	if req.GetSessionId() != "" && status.Code(err) == codes.AlreadyExists {
		// From before a restart, or made through another gateway: its
		// next call restores it from its checkpoint if its sandbox is
		// gone, and says so.
		e.sandboxID = req.GetSessionId()
		t.logger.InfoContext(ctx, "sandbox session continued", logkeys.MCPSession, e.mcpID, logkeys.SessionID, e.sandboxID)
		return e.sandboxID, false, nil
	}
	if err != nil {
		t.release(e.Tenant)
		t.logger.ErrorContext(ctx, "create sandbox session", logkeys.MCPSession, e.mcpID, logkeys.Error, err)
		return "", false, err
	}
	e.sandboxID = resp.GetSession().GetId()
	t.logger.InfoContext(ctx, "sandbox session created", logkeys.MCPSession, e.mcpID, logkeys.SessionID, e.sandboxID)
	return e.sandboxID, true, nil
}

// Handed marks the entry's sandbox session as one whose handle the client
// holds: it outlives the MCP session and the gateway, until its TTL or an
// explicit end (runtime.end_session()).
func (e *Entry) Handed() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.handed = true
}

// Observe records the session generation reported by a result and reports
// whether the sandbox was replaced since the previous call although neither
// call said its state was lost (sandboxd reaped an idle sandbox, say). A
// result restored from a checkpoint is no such reset: its restore report
// says what came back, also after a call that ended without a result (one
// the client cancelled).
func (e *Entry) Observe(sandboxID string, r *sandboxv1.ExecResult) (silentlyReset bool) {
	s := r.GetSession()
	if s == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sandboxID != sandboxID {
		return false
	}
	silentlyReset = e.genKnown && s.GetGeneration() != e.gen && !e.lastStateLost && !r.GetStateLost() && r.GetRestored() == nil
	e.genKnown, e.gen, e.lastStateLost = true, s.GetGeneration(), r.GetStateLost()
	return silentlyReset
}

// End forgets an MCP session, for every tenant, and destroys its sandbox
// sessions. It is idempotent and safe for sessions the table never saw.
func (t *Table) End(ctx context.Context, mcpID string) {
	t.endMatching(ctx, func(k key) bool { return k.mcpID == mcpID }, mcpID)
}

// EndFor is End limited to one tenant's entry: what a client's DELETE over
// HTTP may end. The sandbox session of the handle HandleFor derives is
// ended too, though this gateway may have no entry for it (the MCP
// session began before a restart, or went through another gateway), so
// that the ID cannot bring the state back later.
func (t *Table) EndFor(ctx context.Context, tenant, mcpID string) {
	destroyed := t.endMatching(ctx, func(k key) bool { return k == key{tenant, mcpID} }, "")
	h := HandleFor(tenant, mcpID)
	if slices.Contains(destroyed, h) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), destroyTimeout)
	defer cancel()
	_, err := t.client.DestroySession(ctx, &sandboxv1.DestroySessionRequest{SessionId: h, Tenant: tenant})
	switch {
	case err == nil:
		t.logger.InfoContext(ctx, "sandbox session destroyed", logkeys.MCPSession, mcpID, logkeys.SessionID, h)
	case status.Code(err) != codes.NotFound:
		t.logger.ErrorContext(ctx, "destroy sandbox session", logkeys.MCPSession, mcpID, logkeys.SessionID, h, logkeys.Error, err)
	}
}

// endMatching ends the matching entries and returns the sandbox sessions
// it destroyed.
func (t *Table) endMatching(ctx context.Context, match func(key) bool, forgetKnown string) []string {
	var ended []*Entry
	t.mu.Lock()
	for k, e := range t.entries {
		if match(k) {
			ended = append(ended, e)
			delete(t.entries, k)
		}
	}
	if forgetKnown != "" {
		delete(t.known, forgetKnown)
	}
	t.mu.Unlock()
	if len(ended) == 0 {
		return nil
	}
	// The session's own context is often already cancelled (a closed
	// connection), but the sandbox must still go.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), destroyTimeout)
	defer cancel()
	var destroyed []string
	for _, e := range ended {
		if id := t.destroy(ctx, e); id != "" {
			destroyed = append(destroyed, id)
		}
	}
	return destroyed
}

// destroy ends e and destroys its sandbox session, and returns that
// session's ID when it had one.
func (t *Table) destroy(ctx context.Context, e *Entry) string {
	e.mu.Lock()
	id, handed := e.sandboxID, e.handed
	e.ended, e.sandboxID = true, ""
	e.mu.Unlock()
	if id == "" {
		return ""
	}
	t.release(e.Tenant)
	if handed {
		t.logger.InfoContext(ctx, "sandbox session kept: its client holds the handle", logkeys.MCPSession, e.mcpID, logkeys.SessionID, id)
		return ""
	}
	_, err := t.client.DestroySession(ctx, &sandboxv1.DestroySessionRequest{SessionId: id, Tenant: e.Tenant})
	if err != nil && status.Code(err) != codes.NotFound {
		t.logger.ErrorContext(ctx, "destroy sandbox session", logkeys.MCPSession, e.mcpID, logkeys.SessionID, id, logkeys.Error, err)
		return id
	}
	t.logger.InfoContext(ctx, "sandbox session destroyed", logkeys.MCPSession, e.mcpID, logkeys.SessionID, id)
	return id
}

// CloseAll refuses new sessions and destroys every existing one but those
// of derived handles: an MCP session over HTTP outlives the gateway, and
// its client, continuing it through the next gateway, finds its state
// there.
func (t *Table) CloseAll(ctx context.Context) error {
	t.mu.Lock()
	t.closed = true
	entries := t.entries
	t.entries = map[key]*Entry{}
	t.mu.Unlock()

	var wg sync.WaitGroup
	for _, e := range entries {
		if e.derived {
			continue
		}
		wg.Go(func() { t.destroy(ctx, e) })
	}
	wg.Wait()
	return ctx.Err()
}

// Count reports how many MCP sessions (per tenant) the table tracks.
func (t *Table) Count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}
