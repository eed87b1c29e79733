package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/codeexec/codeexec/gateway/internal/auth"
	"github.com/codeexec/codeexec/gateway/internal/result"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/logkeys"
)

// ServerName is the MCP server name, kept from upstream so that client
// configurations and prompts that name it keep working.
const ServerName = "mcp-server-code-execution-mode"

// Defaults for the zero values of Config, as upstream's environment does.
const (
	DefaultTimeout    = 30 * time.Second
	DefaultMaxTimeout = 120 * time.Second
	DefaultTenant     = "default"
)

// Config configures a Gateway. Zero values take the defaults above.
type Config struct {
	// DefaultTimeout applies when a call gives no timeout
	// (MCP_BRIDGE_TIMEOUT, default 30s).
	DefaultTimeout time.Duration
	// MaxTimeout caps the timeout a call may ask for
	// (MCP_BRIDGE_MAX_TIMEOUT, default 120s).
	MaxTimeout time.Duration
	// OutputMode is "compact" (the default) or "toon". As upstream does,
	// any value other than empty or "compact" selects TOON.
	OutputMode string
	// OutputLimitBytes is sandboxd's per-stream output cap. The gateway
	// only quotes it in the truncation note; sandboxd does the cutting.
	// Zero means unknown.
	OutputLimitBytes int64
	// Tenant owns the sandbox sessions the gateway creates ("default").
	Tenant string
	// Version is reported as the MCP server version.
	Version string
	// SessionIdleTimeout ends HTTP sessions idle for this long, as if the
	// client had sent DELETE, so that clients that vanish do not leave
	// sandbox sessions and routing entries behind. Zero keeps them until
	// sandboxd reaps the sandbox session.
	SessionIdleTimeout time.Duration
	// Auth controls access to the HTTP transport. stdio is not affected:
	// whoever starts the process owns it.
	Auth HTTPAuth
	// Quotas cap each tenant's sessions and calls.
	Quotas Quotas
	// Registerer, when set, receives the gateway's metrics.
	Registerer prometheus.Registerer
}

func (c Config) withDefaults() Config {
	if c.DefaultTimeout == 0 {
		c.DefaultTimeout = DefaultTimeout
	}
	if c.MaxTimeout == 0 {
		c.MaxTimeout = DefaultMaxTimeout
	}
	if c.Tenant == "" {
		c.Tenant = DefaultTenant
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	return c
}

// Validate reports configuration errors. A default timeout above the maximum
// is accepted and clamped per call, as upstream does.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.DefaultTimeout < time.Second {
		errs = append(errs, fmt.Errorf("default timeout (MCP_BRIDGE_TIMEOUT) is %v; it must be at least 1s", c.DefaultTimeout))
	}
	if c.MaxTimeout < time.Second {
		errs = append(errs, fmt.Errorf("maximum timeout (MCP_BRIDGE_MAX_TIMEOUT) is %v; it must be at least 1s", c.MaxTimeout))
	}
	if c.Quotas.Sessions < 0 || c.Quotas.Execs < 0 || c.Quotas.ExecsPerMinute < 0 {
		errs = append(errs, fmt.Errorf("quotas %+v: each must be zero (no cap) or positive", c.Quotas))
	}
	if err := c.Auth.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.OutputLimitBytes < 0 {
		errs = append(errs, fmt.Errorf("output limit is %d bytes; it must be zero (unknown) or positive", c.OutputLimitBytes))
	}
	return errors.Join(errs...)
}

// seconds converts d to whole seconds, rounding up.
func seconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}

// Gateway serves MCP clients and runs their code through the sandbox service.
type Gateway struct {
	cfg        Config
	mode       result.Mode
	defaultSec int
	maxSec     int
	sandbox    sandboxv1.SandboxServiceClient
	logger     *slog.Logger
	mcp        *server.MCPServer
	sessions   *sessionTable
	authn      auth.Authenticator
	quota      *execQuota
	calls      callTracker
	metrics    *metrics

	// owners maps each MCP session begun in this process to the tenant
	// that initialised it.
	ownersMu sync.Mutex
	owners   map[string]string

	httpOnce sync.Once
	http     http.Handler
}

// New builds a Gateway. The sandbox client is used for every call; the
// caller keeps ownership of its connection.
func New(cfg Config, sandbox sandboxv1.SandboxServiceClient, logger *slog.Logger) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gateway config: %w", err)
	}
	if sandbox == nil {
		return nil, errors.New("gateway: nil sandbox client")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	g := &Gateway{
		cfg:        cfg,
		mode:       result.ParseMode(cfg.OutputMode),
		defaultSec: seconds(cfg.DefaultTimeout),
		maxSec:     seconds(cfg.MaxTimeout),
		sandbox:    sandbox,
		logger:     logger.With(logkeys.Service, "gateway"),
		quota:      newExecQuota(cfg.Quotas),
		owners:     map[string]string{},
		metrics:    newMetrics(),
	}
	authn, err := newAuthenticator(cfg.Auth)
	if err != nil {
		return nil, fmt.Errorf("gateway authentication: %w", err)
	}
	g.authn = authn
	g.sessions = newSessionTable(sandbox, g.logger)
	g.sessions.maxPerTenant, g.sessions.idleHint = cfg.Quotas.Sessions, cfg.SessionIdleTimeout
	if cfg.Registerer != nil {
		if err := g.metrics.register(cfg.Registerer, g); err != nil {
			return nil, fmt.Errorf("gateway metrics: %w", err)
		}
	}
	if g.defaultSec > g.maxSec {
		g.logger.Warn("default timeout exceeds the maximum; calls without a timeout get the maximum",
			"default", cfg.DefaultTimeout, "max", cfg.MaxTimeout)
	}

	hooks := &server.Hooks{}
	hooks.AddBeforeCallTool(routeUnknownTools)
	// Sessions seen starting here are "known"; see sessionTable.known.
	// Registration covers stdio and in-process sessions; streamable HTTP
	// registers only after answering initialize, so initialize is hooked
	// too, as it runs before the client can send anything else.
	hooks.AddOnRegisterSession(func(_ context.Context, s server.ClientSession) {
		g.sessions.started(s.SessionID())
	})
	hooks.AddAfterInitialize(func(ctx context.Context, _ any, _ *mcp.InitializeRequest, _ *mcp.InitializeResult) {
		if s := server.ClientSessionFromContext(ctx); s != nil {
			g.sessions.started(s.SessionID())
			g.setOwner(s.SessionID(), g.tenantOf(ctx))
		}
	})
	hooks.AddOnUnregisterSession(func(ctx context.Context, s server.ClientSession) {
		g.sessions.end(ctx, s.SessionID())
		g.dropOwner(s.SessionID())
	})
	g.mcp = server.NewMCPServer(ServerName, cfg.Version,
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithHooks(hooks),
		server.WithRecovery(),
	)
	g.mcp.AddTool(g.tool(), g.handleRunPython)
	g.mcp.AddResource(capabilitiesResource(), handleCapabilities)
	return g, nil
}

// MCPServer returns the underlying MCP server, for in-process clients and
// for transports other than the two the Gateway wires itself.
func (g *Gateway) MCPServer() *server.MCPServer { return g.mcp }

// ServeStdio serves one MCP client over in and out until in ends or ctx is
// cancelled. stdio is one MCP session, so it is one sandbox session, which
// is destroyed when ServeStdio returns.
func (g *Gateway) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	s := server.NewStdioServer(g.mcp)
	// mcp-go logs through the standard log package; route it into slog
	// (never stdout, which carries the protocol).
	s.SetErrorLogger(slog.NewLogLogger(g.logger.Handler(), slog.LevelError))
	err := s.Listen(ctx, in, out)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// HTTPHandler returns the streamable HTTP transport, to mount at /mcp.
//
// Only the session-based protocol revisions (up to 2025-11-25) are offered:
// a persistent sandbox needs a session to hang on, and the stateless
// 2026-07-28 core has none. Clients that support both negotiate down, and
// mcp-go refuses requests that insist on the stateless core. (A sessionless
// call reaching MCPServer by another route runs in a throwaway sandbox.)
// A DELETE that ends a session destroys its sandbox session.
//
// Requests pass the guard first: Host and Origin checks against DNS
// rebinding, then authentication when Config.Auth enables it (see
// HTTPAuth); the credentials decide the tenant.
func (g *Gateway) HTTPHandler() http.Handler {
	g.httpOnce.Do(func() {
		inner := server.NewStreamableHTTPServer(g.mcp,
			server.WithStreamableHTTPLogger(g.logger),
			server.WithStreamableHTTPProtocolVersions(mcp.LegacyProtocolVersions()...),
			server.WithSessionIdleTTL(g.cfg.SessionIdleTimeout),
			// The guard checks Host itself, against a configurable list.
			server.WithDisableLocalhostProtection(true),
		)
		g.http = g.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inner.ServeHTTP(w, r)
			// mcp-go unregisters only sessions it registered; a session
			// that outlived a gateway restart is known here alone.
			if id := r.Header.Get(server.HeaderKeySessionID); r.Method == http.MethodDelete && id != "" {
				g.sessions.endFor(r.Context(), g.tenantOf(r.Context()), id)
			}
		}))
	})
	return g.http
}

// Close destroys every sandbox session the Gateway created. Calls that
// arrive afterwards fail with a tool error.
func (g *Gateway) Close(ctx context.Context) error {
	return g.sessions.closeAll(ctx)
}
