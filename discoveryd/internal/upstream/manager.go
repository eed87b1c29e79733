// Package upstream keeps one MCP client per configured server: started on
// first use, kept warm, restarted with backoff after a crash, and stopped
// for good by Close. Stdio, streamable HTTP and SSE servers are supported.
package upstream

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/discoveryd/internal/config"
)

// Options tune a Manager. Zero values take the defaults shown.
type Options struct {
	// BaseEnv is the environment every stdio server starts with, before its
	// configured env is applied; see DefaultEnv.
	BaseEnv map[string]string
	// CallTimeout bounds a call that gives no timeout of its own. 60s.
	CallTimeout time.Duration
	// StartTimeout bounds starting a server and its MCP handshake. 60s,
	// because an npx server may first have to download its package.
	StartTimeout time.Duration
	// BackoffMin and BackoffMax bound the wait before restarting a server
	// that failed or crashed; it doubles per consecutive failure.
	// 250ms and 30s.
	BackoffMin, BackoffMax time.Duration
	// OnToolsChanged, if set, is called after a server's tool list was
	// (re)loaded, e.g. to rebuild a search index. It must not block.
	OnToolsChanged func(server string)
}

func (o *Options) defaults() {
	if o.CallTimeout <= 0 {
		o.CallTimeout = 60 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = 250 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 30 * time.Second
	}
}

// State is the state of a server's client.
type State int

// The states of a server's client.
const (
	// StateStopped: never started (servers start lazily).
	StateStopped State = iota
	// StateRunning: connected and initialised.
	StateRunning
	// StateFailed: the last start failed or the server crashed.
	StateFailed
)

// Status describes a server without starting it.
type Status struct {
	State State
	// LastError is the last start failure or crash, if any.
	LastError string
	// ToolCount is the length of the last tool list.
	ToolCount int
	// Listed is true once the tools were listed at least once.
	Listed bool
}

// Manager owns the upstream clients. It is safe for concurrent use; calls
// to one server run concurrently over its one connection.
type Manager struct {
	opts   Options
	logger *slog.Logger
	// root bounds the upstream clients, which outlive the call that
	// starts them; Close cancels it. (Calls pass their own context.)
	root   context.Context //nolint:containedctx // the clients' lifetime, not a call's
	cancel context.CancelFunc

	mu      sync.RWMutex
	servers map[string]*server
	closed  bool

	// bg tracks connections being closed in the background, so that Close
	// can wait for their processes too.
	bg sync.WaitGroup
}

// New makes a Manager for servers. Nothing is started until first use.
func New(servers []config.Server, opts Options, logger *slog.Logger) *Manager {
	opts.defaults()
	root, cancel := context.WithCancel(context.Background())
	m := &Manager{opts: opts, logger: logger, root: root, cancel: cancel, servers: map[string]*server{}}
	m.Add(servers)
	return m
}

// Add registers servers whose names are new and returns those names.
// Known names are left alone, as upstream's re-scan is additive only.
func (m *Manager) Add(servers []config.Server) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var added []string
	for _, cfg := range servers {
		if _, ok := m.servers[cfg.Name]; ok || m.closed {
			continue
		}
		m.servers[cfg.Name] = &server{cfg: cfg, m: m}
		added = append(added, cfg.Name)
	}
	return added
}

// Names returns the configured server names, sorted.
func (m *Manager) Names() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Sorted(maps.Keys(m.servers))
}

func (m *Manager) server(name string) (*server, error) {
	m.mu.RLock()
	s, ok := m.servers[name]
	closed := m.closed
	m.mu.RUnlock()
	switch {
	case closed:
		return nil, ErrClosed
	case !ok:
		return nil, unknownServer(name, m.Names())
	}
	return s, nil
}

// Config returns a server's definition.
func (m *Manager) Config(name string) (config.Server, error) {
	s, err := m.server(name)
	if err != nil {
		return config.Server{}, err
	}
	return s.cfg, nil
}

// Status describes a server without starting it.
func (m *Manager) Status(name string) (Status, error) {
	s, err := m.server(name)
	if err != nil {
		return Status{}, err
	}
	return s.status(), nil
}

// CachedTools returns the last tool list of a server without starting it;
// ok is false when the server has never been listed.
func (m *Manager) CachedTools(name string) (tools []mcp.Tool, ok bool) {
	s, err := m.server(name)
	if err != nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools, s.listed
}

// CacheHints is what a server's tools/list answer said of caching it
// (MCP 2026-07-28's ttlMs and cacheScope), and when it was listed.
type CacheHints struct {
	// TTLMs is how long the list may be kept, in milliseconds, or nil
	// when the server did not say.
	TTLMs *int64
	// Scope is "public", "private" or empty.
	Scope string
	// ListedAt is when the answer came.
	ListedAt time.Time
}

// CachedList is CachedTools with the list's cache hints.
func (m *Manager) CachedList(name string) (tools []mcp.Tool, hints CacheHints, ok bool) {
	s, err := m.server(name)
	if err != nil {
		return nil, CacheHints{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools, s.hints, s.listed
}

// withTimeout bounds ctx by d (or the default), marking the cause so that
// errors can tell our timeout from the caller's cancellation. A caller's
// deadline that comes sooner (run_python's timeout, passed on by the
// sandbox) shortens d, less a reserve in which the answer gets back: so
// that the caller learns which server it waited for, and what to do, rather
// than running out of its own time with a bare deadline error.
func (m *Manager) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		d = m.opts.CallTimeout
	}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left -= min(left/10, time.Second); left < d {
			d = max(left, 0).Truncate(100 * time.Millisecond) // a figure to read in messages
		}
	}
	ctx = context.WithValue(ctx, timeoutKey{}, d)
	return context.WithTimeoutCause(ctx, d, errCallTimeout)
}

// Start starts a server that is not running and waits until it is up, or
// its start failed (StartTimeout bounds it), or ctx ends. It does not list
// the server's tools.
func (m *Manager) Start(ctx context.Context, name string) error {
	s, err := m.server(name)
	if err != nil {
		return err
	}
	_, err = s.ensure(ctx)
	return err
}

// Tools returns a server's tools, starting it if needed. The list is
// cached until the server says it changed or the server restarts.
func (m *Manager) Tools(ctx context.Context, name string) ([]mcp.Tool, error) {
	s, err := m.server(name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := m.withTimeout(ctx, 0)
	defer cancel()
	c, err := s.ensureWithin(ctx)
	if err != nil {
		return nil, err
	}
	return s.toolsFor(ctx, c)
}

// CallTool calls tool on server with args, within timeout (0 means the
// default), starting the server if needed, once gate (nil: none) lets
// it. A tool that reports failure returns a result with IsError set, not
// an error.
func (m *Manager) CallTool(ctx context.Context, name, tool string, args map[string]any, timeout time.Duration, gate Gate) (*mcp.CallToolResult, error) {
	s, err := m.server(name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := m.withTimeout(ctx, timeout)
	defer cancel()
	return s.call(ctx, tool, args, gate)
}

// Gate decides, with the tool as the server lists it, whether a call may
// go out; its error is the call's.
type Gate func(tool mcp.Tool) error

// Close stops every server and waits until their processes are gone.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	servers := make([]*server, 0, len(m.servers))
	for _, s := range m.servers {
		servers = append(servers, s)
	}
	m.mu.Unlock()
	m.cancel() // aborts starts in progress
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(s.close)
	}
	wg.Wait()
	m.bg.Wait()
	return nil
}
