package upstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/discoveryd/internal/config"
	"github.com/codeexec/codeexec/services/logkeys"
)

// errCallTimeout is the cause of a context that ran out of its per-call
// timeout, as opposed to one the caller cancelled.
var errCallTimeout = errors.New("upstream call timeout")

// attempt is one start in progress; callers that arrive meanwhile wait
// for it instead of starting a second process.
type attempt struct {
	done chan struct{}
	conn *conn
	err  error
}

// server is the state of one configured server.
type server struct {
	cfg config.Server
	m   *Manager

	mu       sync.Mutex
	conn     *conn    // nil until started, and after a crash
	starting *attempt // non-nil while a start runs
	failures int      // consecutive start failures and crashes
	nextTry  time.Time
	lastErr  error
	closed   bool

	tools      []mcp.Tool // the last list, kept across restarts for search
	listed     bool       // tools holds a real list
	toolsValid bool       // tools is current for conn
	toolsGen   uint64     // bumped by every invalidation
	hints      CacheHints // what the last list said of caching it
}

// ensure returns a live connection, starting the server if needed. A
// server that failed or crashed is retried after a backoff that doubles
// with every consecutive failure.
func (s *server) ensure(ctx context.Context) (*conn, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if c := s.conn; c != nil {
		if !c.dead() {
			s.mu.Unlock()
			return c, nil
		}
		s.retireLocked(c, c.crashError(s.cfg.Name, "idle time", errors.New("process exited")))
	}
	a := s.starting
	if a == nil {
		// A use during the backoff fails at once with the error of the
		// last start, the one that says why, as the uses before it did:
		// waiting the backoff out (up to BackoffMax) would only hold the
		// call to learn, most likely, the same thing. The first use after
		// the backoff starts the server again.
		if wait := time.Until(s.nextTry); wait > 0 {
			err, failures := s.lastErr, s.failures
			s.mu.Unlock()
			s.m.logger.DebugContext(ctx, "MCP server backing off", logkeys.MCPServer, s.cfg.Name, "failures", failures, "retry_in", wait)
			return nil, err
		}
		a = &attempt{done: make(chan struct{})}
		s.starting = a
		// The start belongs to the server, not to this call: a server slower
		// to start than the call's timeout (npx fetching its package, a busy
		// machine) keeps starting, bounded by StartTimeout, and the next call
		// finds it up. Ended with the call, it would be killed and started
		// from scratch each time, and never come up.
		bg := context.WithoutCancel(ctx) // keeps the call's values for logs
		s.m.bg.Go(func() {
			c, err := s.start(bg)
			s.finishStart(a, c, err)
		})
	}
	s.mu.Unlock()
	select {
	case <-a.done:
		return a.conn, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// finishStart records the end of attempt a and wakes its waiters.
func (s *server) finishStart(a *attempt, c *conn, err error) {
	s.mu.Lock()
	s.starting = nil
	switch {
	case err == nil && s.closed:
		s.m.bg.Go(c.close)
		c, err = nil, ErrClosed
	case err == nil:
		s.conn, s.toolsValid = c, false
		s.toolsGen++
	case s.closed || s.m.root.Err() != nil:
		err = ErrClosed // Close aborted the start: no failure of the server
	default:
		s.recordFailureLocked(err)
	}
	a.conn, a.err = c, err
	s.mu.Unlock()
	close(a.done)
}

// start dials, within StartTimeout. Close aborts it.
func (s *server) start(ctx context.Context) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, s.m.opts.StartTimeout)
	defer cancel()
	stop := context.AfterFunc(s.m.root, cancel) // Close aborts a start
	defer stop()
	s.m.logger.InfoContext(ctx, "starting MCP server", logkeys.MCPServer, s.cfg.Name, "transport", s.cfg.Transport)
	c, err := dial(dctx, s.m.root, s.cfg, s.m.opts.BaseEnv, s.onNotification, s.m.logger)
	err = redact(err)
	if err != nil && dctx.Err() != nil && s.m.root.Err() == nil {
		err = fmt.Errorf("%w: server %q did not finish the MCP handshake within %s: %v", ErrStartFailed, s.cfg.Name, s.m.opts.StartTimeout, err)
	}
	if err != nil {
		s.m.logger.WarnContext(ctx, "MCP server failed to start", logkeys.MCPServer, s.cfg.Name, logkeys.Error, err)
	}
	return c, err
}

func (s *server) recordFailureLocked(err error) {
	s.lastErr = err
	s.failures++
	// The first failure after a success (a crash, a server killed) is
	// retried by the next use at once; from the second in a row on, the
	// backoff doubles from BackoffMin.
	if s.failures == 1 {
		s.nextTry = time.Time{}
		return
	}
	backoff := s.m.opts.BackoffMin << min(s.failures-2, 16)
	if backoff > s.m.opts.BackoffMax || backoff <= 0 {
		backoff = s.m.opts.BackoffMax
	}
	s.nextTry = time.Now().Add(backoff)
}

// retireLocked forgets a broken connection and records why it broke.
func (s *server) retireLocked(c *conn, why error) {
	if s.conn != c {
		return
	}
	s.conn, s.toolsValid = nil, false
	s.recordFailureLocked(why)
	s.m.logger.Warn("MCP server connection lost", logkeys.MCPServer, s.cfg.Name, logkeys.Error, why)
	s.m.bg.Go(c.close)
}

// succeeded resets the backoff once a connection has served a request.
func (s *server) succeeded(c *conn) {
	s.mu.Lock()
	if s.conn == c {
		s.failures, s.lastErr = 0, nil
	}
	s.mu.Unlock()
}

// onNotification runs on the transport's read loop, so it must not block:
// it invalidates the tool list and refreshes it in the background.
func (s *server) onNotification(n mcp.JSONRPCNotification) {
	if n.Method != string(mcp.MethodNotificationToolsListChanged) {
		return
	}
	s.mu.Lock()
	s.toolsValid = false
	s.toolsGen++
	c := s.conn
	s.mu.Unlock()
	s.m.logger.Info("MCP server tool list changed", logkeys.MCPServer, s.cfg.Name)
	if c == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(s.m.root, s.m.opts.CallTimeout)
		defer cancel()
		_, _ = s.listTools(ctx, c)
	}()
}

// toolsFor returns the tool list of c, listing it when the cache is stale.
func (s *server) toolsFor(ctx context.Context, c *conn) ([]mcp.Tool, error) {
	s.mu.Lock()
	if s.toolsValid && s.conn == c {
		t := s.tools
		s.mu.Unlock()
		return t, nil
	}
	s.mu.Unlock()
	return s.listTools(ctx, c)
}

func (s *server) listTools(ctx context.Context, c *conn) ([]mcp.Tool, error) {
	// A tools/list_changed that arrives while listing makes the answer
	// stale; list again (a server announcing tools right after start does
	// this), but not forever.
	for attempt := 1; ; attempt++ {
		s.mu.Lock()
		gen := s.toolsGen
		s.mu.Unlock()
		res, err := c.client.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			return nil, s.callError(ctx, c, "tools/list", err)
		}
		s.succeeded(c)
		s.mu.Lock()
		current := s.toolsGen == gen
		if s.conn == c {
			s.tools, s.listed, s.toolsValid = res.Tools, true, current
			s.hints = CacheHints{TTLMs: res.TTLMs, Scope: string(res.CacheScope), ListedAt: time.Now()}
		}
		s.mu.Unlock()
		if s.m.opts.OnToolsChanged != nil {
			s.m.opts.OnToolsChanged(s.cfg.Name)
		}
		if current || attempt == 3 {
			return res.Tools, nil
		}
	}
}

// callError turns a failed request on c into one of the package's errors.
func (s *server) callError(ctx context.Context, c *conn, op string, err error) error {
	err = redact(err)
	if errors.Is(context.Cause(ctx), errCallTimeout) {
		hint := ""
		if op == "tools/list" {
			hint = " (a later call lists them again)"
		}
		return fmt.Errorf("%w: server %q did not answer %s within %s%s", ErrTimeout, s.cfg.Name, op, callTimeout(ctx, s.m.opts.CallTimeout), hint)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var te *transport.Error
	if c.dead() || errors.Is(err, transport.ErrTransportClosed) || errors.As(err, &te) {
		cerr := c.crashError(s.cfg.Name, op, err)
		s.mu.Lock()
		s.retireLocked(c, cerr)
		s.mu.Unlock()
		return cerr
	}
	// The server answered with a JSON-RPC error: it is alive and said no.
	return fmt.Errorf("%w: server %q rejected %s: %w", ErrRejected, s.cfg.Name, op, err)
}

// ensureWithin is ensure for a context that carries a per-call timeout:
// running out of it while starting is reported as ErrTimeout.
func (s *server) ensureWithin(ctx context.Context) (*conn, error) {
	c, err := s.ensure(ctx)
	if err != nil && errors.Is(context.Cause(ctx), errCallTimeout) {
		return nil, fmt.Errorf("%w: server %q did not start within the call's timeout of %s (it goes on starting, for up to %s; a later call uses it once it is up): %v",
			ErrTimeout, s.cfg.Name, callTimeout(ctx, s.m.opts.CallTimeout), s.m.opts.StartTimeout, err)
	}
	return c, err
}

func callTimeout(ctx context.Context, def time.Duration) time.Duration {
	if d, ok := ctx.Value(timeoutKey{}).(time.Duration); ok {
		return d
	}
	return def
}

// timeoutKey carries the per-call timeout, for error messages.
type timeoutKey struct{}

// call runs one tools/call on a live connection, once gate, when set, has
// let the tool's call through.
func (s *server) call(ctx context.Context, tool string, args map[string]any, gate Gate) (*mcp.CallToolResult, error) {
	c, err := s.ensureWithin(ctx)
	if err != nil {
		return nil, err
	}
	tools, err := s.toolsFor(ctx, c)
	if err != nil {
		return nil, err
	}
	if !hasTool(tools, tool) {
		// The cached list may predate a tool the server added without
		// announcing it; ask once more before refusing.
		if tools, err = s.listTools(ctx, c); err != nil {
			return nil, err
		}
		if !hasTool(tools, tool) {
			return nil, UnknownToolError(s.cfg.Name, tool, toolNames(tools))
		}
	}
	if gate != nil {
		if err := gate(tools[slices.IndexFunc(tools, func(t mcp.Tool) bool { return t.Name == tool })]); err != nil {
			return nil, err
		}
	}
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := c.client.CallTool(ctx, req)
	if err != nil {
		return nil, s.callError(ctx, c, fmt.Sprintf("tools/call %q", tool), err)
	}
	s.succeeded(c)
	return res, nil
}

func hasTool(tools []mcp.Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

func toolNames(tools []mcp.Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name
	}
	return out
}

// status describes the server without starting it.
func (s *server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{State: StateStopped, ToolCount: len(s.tools), Listed: s.listed}
	switch {
	case s.conn != nil && !s.conn.dead():
		st.State = StateRunning
	case s.lastErr != nil:
		st.State = StateFailed
	}
	if s.lastErr != nil {
		st.LastError = strings.TrimSpace(s.lastErr.Error())
	}
	return st
}

// close stops the connection; later calls get ErrClosed.
func (s *server) close() {
	s.mu.Lock()
	s.closed = true
	c := s.conn
	s.conn = nil
	a := s.starting
	s.mu.Unlock()
	if a != nil {
		<-a.done // ensure closes a connection that lands after closed is set
	}
	if c != nil {
		c.close()
	}
}
