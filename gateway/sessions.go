package gateway

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/logkeys"
)

// labelMCPSession is the sandbox session label that names the MCP session,
// so that operators can match the two in ListSessions.
const labelMCPSession = "mcp.session"

// destroyTimeout bounds a DestroySession made on behalf of a session that
// has already ended, whose own context may be gone.
const destroyTimeout = 10 * time.Second

var (
	errClosed       = errors.New("the gateway is shutting down; no new code can run")
	errSessionEnded = errors.New("the MCP session has ended")
)

// sessionTable maps MCP session IDs to sandbox sessions. The routing it
// holds is all the state the gateway has, and it rebuilds itself: a lost
// entry just means a fresh sandbox session on the next call.
//
// Entries are keyed by tenant and MCP session ID together, so a tenant that
// learns (or guesses) another tenant's MCP session ID still reaches only its
// own sandbox sessions.
type sessionTable struct {
	client sandboxv1.SandboxServiceClient
	logger *slog.Logger
	// maxPerTenant caps the sandbox sessions one tenant holds at once; zero
	// means no cap. idleHint is quoted in the quota error.
	maxPerTenant int
	idleHint     time.Duration

	mu      sync.Mutex
	closed  bool
	entries map[sessionKey]*sessionEntry
	// live counts each tenant's sandbox sessions, created or being created.
	live map[string]int
	// known holds the MCP sessions this process saw start. A call from any
	// other session comes from a client of an earlier gateway process,
	// whose sandbox session (and state) this one cannot reach.
	known map[string]bool
}

// sessionKey identifies an entry: one tenant's view of one MCP session.
type sessionKey struct{ tenant, mcpID string }

// sessionEntry is one MCP session's sandbox session. Its mutex serialises
// creation, so concurrent first calls share one sandbox session.
type sessionEntry struct {
	tenant string
	mcpID  string

	mu        sync.Mutex
	sandboxID string
	ended     bool
	// Generation tracking, to notice a sandbox that was replaced between
	// calls without the gateway being told (see observe).
	genKnown      bool
	gen           uint64
	lastStateLost bool
}

func newSessionTable(client sandboxv1.SandboxServiceClient, logger *slog.Logger) *sessionTable {
	return &sessionTable{client: client, logger: logger, entries: map[sessionKey]*sessionEntry{}, live: map[string]int{}, known: map[string]bool{}}
}

// started records that an MCP session began in this process.
func (t *sessionTable) started(mcpID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.known[mcpID] = true
}

// isKnown reports whether an MCP session began in this process.
func (t *sessionTable) isKnown(mcpID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.known[mcpID]
}

// entry returns a tenant's entry for an MCP session, adding it if needed.
func (t *sessionTable) entry(tenant, mcpID string) (*sessionEntry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errClosed
	}
	k := sessionKey{tenant, mcpID}
	e, ok := t.entries[k]
	if !ok {
		e = &sessionEntry{tenant: tenant, mcpID: mcpID}
		t.entries[k] = e
	}
	return e, nil
}

// reserve counts a sandbox session against its tenant's quota.
func (t *sessionTable) reserve(tenant string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.maxPerTenant > 0 && t.live[tenant] >= t.maxPerTenant {
		return &QuotaError{Limit: LimitSessions, Max: t.maxPerTenant,
			Retry: "end another MCP session (HTTP DELETE) first" + idleRetry(t.idleHint)}
	}
	t.live[tenant]++
	return nil
}

// release undoes reserve.
func (t *sessionTable) release(tenant string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live[tenant]--; t.live[tenant] <= 0 {
		delete(t.live, tenant)
	}
}

// sandboxID returns the entry's sandbox session, creating it on first use;
// created says whether it did.
func (t *sessionTable) sandboxID(ctx context.Context, e *sessionEntry) (id string, created bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return "", false, errSessionEnded
	}
	if e.sandboxID != "" {
		return e.sandboxID, false, nil
	}
	id, err = t.createLocked(ctx, e)
	return id, err == nil, err
}

// replace swaps a sandbox session that sandboxd no longer knows (NotFound,
// e.g. after a sandboxd restart) for a new one. If another call already
// replaced it, that replacement is used.
func (t *sessionTable) replace(ctx context.Context, e *sessionEntry, stale string) (string, error) {
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
		t.release(e.tenant) // the lost session no longer counts
	}
	e.sandboxID, e.genKnown = "", false
	return t.createLocked(ctx, e)
}

func (t *sessionTable) createLocked(ctx context.Context, e *sessionEntry) (string, error) {
	if err := t.reserve(e.tenant); err != nil {
		return "", err
	}
	resp, err := t.client.CreateSession(ctx, &sandboxv1.CreateSessionRequest{
		Tenant: e.tenant,
		Labels: map[string]string{labelMCPSession: e.mcpID},
	})
	if err != nil {
		t.release(e.tenant)
		t.logger.ErrorContext(ctx, "create sandbox session", logkeys.MCPSession, e.mcpID, logkeys.Error, err)
		return "", err
	}
	e.sandboxID = resp.GetSession().GetId()
	t.logger.InfoContext(ctx, "sandbox session created", logkeys.MCPSession, e.mcpID, logkeys.SessionID, e.sandboxID)
	return e.sandboxID, nil
}

// observe records the session generation reported by a result and reports
// whether the sandbox was replaced since the previous call although neither
// call said its state was lost (sandboxd reaped an idle sandbox, say).
func (e *sessionEntry) observe(sandboxID string, r *sandboxv1.ExecResult) (silentlyReset bool) {
	s := r.GetSession()
	if s == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sandboxID != sandboxID {
		return false
	}
	silentlyReset = e.genKnown && s.GetGeneration() != e.gen && !e.lastStateLost && !r.GetStateLost()
	e.genKnown, e.gen, e.lastStateLost = true, s.GetGeneration(), r.GetStateLost()
	return silentlyReset
}

// end forgets an MCP session, for every tenant, and destroys its sandbox
// sessions. It is idempotent and safe for sessions the table never saw.
func (t *sessionTable) end(ctx context.Context, mcpID string) {
	t.endMatching(ctx, func(k sessionKey) bool { return k.mcpID == mcpID }, mcpID)
}

// endFor is end limited to one tenant's entry: what a client's DELETE may
// end.
func (t *sessionTable) endFor(ctx context.Context, tenant, mcpID string) {
	t.endMatching(ctx, func(k sessionKey) bool { return k == sessionKey{tenant, mcpID} }, "")
}

func (t *sessionTable) endMatching(ctx context.Context, match func(sessionKey) bool, forgetKnown string) {
	var ended []*sessionEntry
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
		return
	}
	// The session's own context is often already cancelled (a closed
	// connection), but the sandbox must still go.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), destroyTimeout)
	defer cancel()
	for _, e := range ended {
		t.destroy(ctx, e)
	}
}

func (t *sessionTable) destroy(ctx context.Context, e *sessionEntry) {
	e.mu.Lock()
	id := e.sandboxID
	e.ended, e.sandboxID = true, ""
	e.mu.Unlock()
	if id == "" {
		return
	}
	t.release(e.tenant)
	_, err := t.client.DestroySession(ctx, &sandboxv1.DestroySessionRequest{SessionId: id, Tenant: e.tenant})
	if err != nil && status.Code(err) != codes.NotFound {
		t.logger.ErrorContext(ctx, "destroy sandbox session", logkeys.MCPSession, e.mcpID, logkeys.SessionID, id, logkeys.Error, err)
		return
	}
	t.logger.InfoContext(ctx, "sandbox session destroyed", logkeys.MCPSession, e.mcpID, logkeys.SessionID, id)
}

// closeAll refuses new sessions and destroys every existing one.
func (t *sessionTable) closeAll(ctx context.Context) error {
	t.mu.Lock()
	t.closed = true
	entries := t.entries
	t.entries = map[sessionKey]*sessionEntry{}
	t.mu.Unlock()

	var wg sync.WaitGroup
	for _, e := range entries {
		wg.Go(func() { t.destroy(ctx, e) })
	}
	wg.Wait()
	return ctx.Err()
}

// count reports how many MCP sessions the table tracks, for tests.
func (t *sessionTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}
