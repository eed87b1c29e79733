package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/gateway/internal/auth"
	"github.com/codeexec/codeexec/gateway/internal/bodylimit"
	"github.com/codeexec/codeexec/gateway/internal/capabilities"
	"github.com/codeexec/codeexec/gateway/internal/drain"
	"github.com/codeexec/codeexec/gateway/internal/files"
	"github.com/codeexec/codeexec/gateway/internal/guard"
	"github.com/codeexec/codeexec/gateway/internal/mcpfix"
	"github.com/codeexec/codeexec/gateway/internal/metrics"
	"github.com/codeexec/codeexec/gateway/internal/params"
	"github.com/codeexec/codeexec/gateway/internal/passthrough"
	"github.com/codeexec/codeexec/gateway/internal/quota"
	"github.com/codeexec/codeexec/gateway/internal/reqstate"
	"github.com/codeexec/codeexec/gateway/internal/result"
	"github.com/codeexec/codeexec/gateway/internal/route"
	"github.com/codeexec/codeexec/gateway/internal/runpython"
	"github.com/codeexec/codeexec/gateway/internal/sessions"
	"github.com/codeexec/codeexec/gateway/internal/tasks"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/dial"
)

// ServerName is the MCP server name, kept from upstream so that client
// configurations and prompts that name it keep working.
const ServerName = "mcp-server-code-execution-mode"

// ToolName is the one tool the gateway offers.
const ToolName = runpython.Name

// CapabilitiesURI is the one resource the gateway offers: the manual of
// the sandbox's helpers.
const CapabilitiesURI = capabilities.URI

// HelperSummary is the short digest of what sandboxed code can use. The
// sandbox's runtime.capability_summary() gives the full manual.
const HelperSummary = capabilities.HelperSummary

// Defaults for the zero values of Config, as upstream's environment does.
const (
	DefaultTimeout    = 30 * time.Second
	DefaultMaxTimeout = time.Hour
	DefaultTenant     = "default"
	// DefaultYield is below the strictest common MCP client's request
	// timeout, Claude Code's 60 s, by enough for the call's own work
	// around the run (finding the session, restoring it, rendering the
	// result) and a loaded host: a call that yields at 45 s answers well
	// before the client gives up.
	DefaultYield = 45 * time.Second
)

// Gateway serves MCP clients and runs their code through the sandbox service.
type Gateway struct {
	cfg      Config
	logger   *slog.Logger
	mcp      *server.MCPServer
	tool     *runpython.Tool
	sessions *sessions.Table
	owners   *sessions.Owners
	guard    *guard.Guard
	quota    *quota.Execs
	calls    drain.Tracker
	router   *route.Router
	// tools is the configured surface; passthrough says whether its
	// tools are served at all (discovery is there).
	tools       []string
	passthrough bool
	metrics     *metrics.Metrics
	bodies      *bodylimit.Budget // HTTP request bytes in flight

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
	tools, _ := parseSurface(cfg.Tools) // Validate has parsed it
	if cfg.Discovery == nil && !slices.Equal(tools, surfaces[ToolsRunPython]) {
		return nil, fmt.Errorf("gateway: --tools %s needs MCP server discovery, and the gateway was given none (the gateway target alone: --discovery ADDR)", cfg.Tools)
	}
	states, err := reqstate.New(cfg.StateKey)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	m := metrics.New()
	// Every call on a session goes to the replica that holds it; see
	// route.
	router := route.NewRouter(sandbox, cfg.DialReplica)
	g := &Gateway{
		cfg:      cfg,
		logger:   logger,
		router:   router,
		sessions: sessions.NewTable(router, quota.NewSessions(cfg.Quotas.Sessions, tenantSessions(router), cfg.SessionIdleTimeout), logger),
		owners:   sessions.NewOwners(),
		quota:    quota.NewExecs(cfg.Quotas),

		tools:       tools,
		passthrough: cfg.Discovery != nil,
		metrics:     m,
		bodies:      bodylimit.NewBudget(cfg.HTTP.bodyLimits()),
	}
	g.guard, err = guard.New(guard.Options{Config: cfg.Auth, Tenant: cfg.Tenant, ResourceName: ServerName, Owns: g.owners.Owns, Metrics: m, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("gateway authentication: %w", err)
	}
	if cfg.Registerer != nil {
		if err := m.Register(cfg.Registerer, g.calls.InFlight, g.sessions.Count); err != nil {
			return nil, fmt.Errorf("gateway metrics: %w", err)
		}
	}
	g.tool = runpython.New(runpython.Options{
		Limits: limitsOf(cfg, logger), TenantLimits: cfg.limitsFor, Yield: max(cfg.Yield, 0), Mode: modeOf(cfg, logger), OutputLimitBytes: cfg.OutputLimitBytes, Tenant: cfg.Tenant,
		Sandbox: g.router, Sessions: g.sessions, Quota: g.quota, Calls: &g.calls, Metrics: m, Logger: logger,
		MaxToolCalls: cfg.maxToolCalls, States: states,
	})
	g.mcp = server.NewMCPServer(ServerName, cfg.Version,
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithHooks(g.hooks()),
		// Served under 2026-07-28 by tasks.Handler and tasks.Stdio.
		server.WithExtensions(map[string]any{tasks.Extension: map[string]any{}}),
		server.WithRecovery(),
		// Each request sees the tools of its surface alone.
		server.WithToolFilter(g.filterTools),
	)
	g.mcp.AddTool(g.tool.Definition(), g.tool.Handle)
	if g.passthrough {
		pt := passthrough.New(passthrough.Options{Discovery: cfg.Discovery, Tenant: cfg.Tenant, Quota: g.quota, Calls: &g.calls, Logger: logger, States: states})
		defs := passthrough.Definitions()
		for i, h := range []server.ToolHandlerFunc{pt.Search, pt.Describe, pt.Call} {
			g.mcp.AddTool(defs[i], h)
		}
	}
	g.mcp.AddResource(capabilities.Resource(), capabilities.Read)
	// Files under /workspace/out, linked from results; read from the
	// session store through any replica.
	g.mcp.AddResourceTemplate(files.Template(), (&files.Reader{Sandbox: sandbox, Tenant: cfg.Tenant}).Read)
	return g, nil
}

// limitsOf is a call's timeout limits in whole seconds. A default above
// the maximum is clamped per call, as upstream does, with a warning here.
func limitsOf(cfg Config, logger *slog.Logger) params.Limits {
	limits := params.Limits{DefaultSeconds: seconds(cfg.DefaultTimeout), MaxSeconds: seconds(cfg.MaxTimeout)}
	if limits.DefaultSeconds > limits.MaxSeconds {
		logger.Warn("default timeout exceeds the maximum; calls without a timeout get the maximum",
			"default", cfg.DefaultTimeout, "max", cfg.MaxTimeout)
	}
	return limits
}

// limitsFor is the timeout limits of a tenant's call: a maximum of its
// own (TenantMaxTimeout) lowers the maximum and the default with it.
func (c Config) limitsFor(tenant string) params.Limits {
	lim := params.Limits{DefaultSeconds: seconds(c.DefaultTimeout), MaxSeconds: seconds(c.MaxTimeout)}
	if d, ok := c.TenantMaxTimeout[tenant]; ok {
		lim.MaxSeconds = min(lim.MaxSeconds, seconds(d))
	}
	return lim
}

// modeOf is how results are rendered. Upstream renders TOON for any value
// but compact, and a client's config written for it must still start; a
// misspelt compact would otherwise go unnoticed, so it is warned of.
func modeOf(cfg Config, logger *slog.Logger) result.Mode {
	mode, known := result.ParseMode(cfg.OutputMode)
	if !known {
		logger.Warn("unknown output mode; rendering TOON, as upstream does for any value but compact",
			"setting", "MCP_BRIDGE_OUTPUT_MODE (--output-mode)", "value", cfg.OutputMode, "accepted", "compact, toon")
	}
	return mode
}

// hooks are the gateway's mcp-go hooks: mcpfix's, and those that track
// MCP sessions. Sessions seen starting here are "known" (see
// sessions.Table.IsKnown). Registration covers stdio and in-process
// sessions; streamable HTTP registers only after answering initialize,
// so initialize is hooked too, as it runs before the client can send
// anything else.
func (g *Gateway) hooks() *server.Hooks {
	hooks := &server.Hooks{}
	// Unknown tools get a tool result, and a listen stream's result waits
	// for its acknowledgement; see mcpfix.
	mcpfix.AddHooks(hooks, g.surface)
	hooks.AddOnRegisterSession(func(_ context.Context, s server.ClientSession) {
		g.sessions.Started(s.SessionID())
	})
	hooks.AddAfterInitialize(func(ctx context.Context, _ any, _ *mcp.InitializeRequest, _ *mcp.InitializeResult) {
		if s := server.ClientSessionFromContext(ctx); s != nil {
			g.sessions.Started(s.SessionID())
			g.owners.Set(s.SessionID(), auth.Tenant(ctx, g.cfg.Tenant))
		}
	})
	hooks.AddOnUnregisterSession(func(ctx context.Context, s server.ClientSession) {
		g.sessions.End(ctx, s.SessionID())
		g.owners.Drop(s.SessionID())
	})
	return hooks
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
	// Batches, foreign cursors, unknown resources and cancelled requests
	// get the answers mcp-go does not give; see mcpfix.
	in, out = mcpfix.Stdio(in, out)
	// The tasks extension of 2026-07-28 is answered before mcp-go; see
	// tasks.
	in, out = tasks.Stdio(ctx, in, out, g.tool, g.cfg.Tenant)
	err := s.Listen(ctx, in, out)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// Drain begins a graceful shutdown: new run_python calls get a "shutting
// down" tool error at once, and Drain waits for the running ones to finish
// until ctx ends. It returns ctx's error if calls were still running then;
// Close afterwards destroys their sandboxes, which ends them.
func (g *Gateway) Drain(ctx context.Context) error {
	idle := g.calls.Drain()
	if n := g.calls.InFlight(); n > 0 {
		g.logger.Info("shutting down: waiting for running calls", "calls", n)
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		g.logger.Warn("shutting down: calls still running at the deadline are stopped", "calls", g.calls.InFlight())
		return ctx.Err()
	}
}

// Close destroys every sandbox session the Gateway created for an MCP
// session over stdio or in process. Sessions reached by handle outlive
// the gateway, and so do those of MCP sessions over HTTP, whose clients
// continue them through the next gateway (see HTTPHandler). It closes the
// connections to other replicas. Calls that arrive afterwards fail with a
// tool error.
func (g *Gateway) Close(ctx context.Context) error {
	err := g.sessions.CloseAll(ctx)
	g.router.Close()
	return err
}

// HashToken returns how a token is written in a tokens file.
func HashToken(token string) string { return auth.Hash(token) }

// ValidTenant checks a tenant name as the tokens file does.
func ValidTenant(t string) error { return auth.ValidTenant(t) }

// Ways DialSandbox spreads new sessions over sandboxd replicas.
const (
	// BalanceLeastLoaded picks the replica with the fewest live sessions
	// (the default).
	BalanceLeastLoaded = string(route.LeastLoaded)
	// BalanceRoundRobin takes the healthy replicas in turn.
	BalanceRoundRobin = string(route.RoundRobin)
)

// DialSandbox connects to sandboxd at addr, for New. A single address
// ("host:port" or "unix:/path") is one connection. Several replicas
// ("host:port,host:port", or "dns:///name:port" for every address of name,
// re-resolved every 5s) get a client that places new sessions by balance
// and pins each session to the replica that holds it. release closes the
// connections.
func DialSandbox(ctx context.Context, addr, balance string, logger *slog.Logger, opts ...grpc.DialOption) (client sandboxv1.SandboxServiceClient, release func(), err error) {
	if !route.IsMulti(addr) {
		conn, err := dial.New(addr, nil, opts...)
		if err != nil {
			return nil, nil, err
		}
		return sandboxv1.NewSandboxServiceClient(conn), func() { _ = conn.Close() }, nil
	}
	resolve, err := route.Parse(addr)
	if err != nil {
		return nil, nil, err
	}
	b, err := route.NewBalancer(ctx, route.Config{
		Resolve: resolve,
		Dial:    func(addr string) (*grpc.ClientConn, error) { return dial.New(addr, nil, opts...) },
		Policy:  route.Policy(balance),
	}, logger.With("component", "replicas"))
	if err != nil {
		return nil, nil, err
	}
	logger.Info("balancing sessions over sandboxd replicas", "sandbox", addr, "balance", balance, "replicas", len(b.Replicas()))
	return b, func() { _ = b.Close() }, nil
}

// tenantSessions counts a tenant's sandbox sessions, on every replica, for
// the sessions quota.
func tenantSessions(client sandboxv1.SandboxServiceClient) func(context.Context, string) (int, error) {
	return func(ctx context.Context, tenant string) (int, error) {
		resp, err := client.ListSessions(ctx, &sandboxv1.ListSessionsRequest{Tenant: tenant})
		if err != nil {
			return 0, fmt.Errorf("list the tenant's sessions: %w", err)
		}
		return len(resp.GetSessions()), nil
	}
}
