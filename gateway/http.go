package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/codeexec/codeexec/gateway/internal/auth"
	"github.com/codeexec/codeexec/gateway/internal/bodylimit"
	"github.com/codeexec/codeexec/gateway/internal/mcpfix"
	"github.com/codeexec/codeexec/gateway/internal/params"
	"github.com/codeexec/codeexec/gateway/internal/sessions"
	"github.com/codeexec/codeexec/gateway/internal/tasks"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Listen binds addr for MCP over HTTP. A process binds it before it
// starts its services, so that a port in use fails at once, not after the
// sandboxes are up; a port of 0 picks a free one, named in Serve's log.
func Listen(addr string) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for MCP over HTTP on %s: %w", addr, err)
	}
	return lis, nil
}

// Serve serves MCP over streamable HTTP on lis at /mcp, with the OAuth
// protected-resource metadata, metrics's /metrics (behind MetricsGuard)
// and /healthz on the same listener. When ctx ends it shuts down
// gracefully: new tool calls are refused (Drain), running ones get up to
// grace to finish, then the listener closes. It does not Close the
// Gateway.
func (g *Gateway) Serve(ctx context.Context, lis net.Listener, grace time.Duration, metrics *prometheus.Registry) error {
	mux := http.NewServeMux()
	mux.Handle("/mcp", g.HTTPHandler())
	mux.Handle("/.well-known/oauth-protected-resource", g.ProtectedResourceHandler())
	mux.Handle("/.well-known/oauth-protected-resource/", g.ProtectedResourceHandler())
	// Metrics name every upstream server, including tenant-limited ones.
	mux.Handle("/metrics", g.MetricsGuard(promhttp.HandlerFor(metrics, promhttp.HandlerOpts{Registry: metrics})))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	// The header read, an idle keep-alive connection, a body (bodylimit)
	// and each write of an answer (writeDeadline) each have a bound, so
	// that a client that stalls holds nothing for long.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: g.cfg.HTTP.IdleTimeout}
	g.logger.InfoContext(ctx, "serving MCP over streamable HTTP", logkeys.Address, "http://"+lis.Addr().String()+"/mcp")
	if !g.Authenticates() {
		g.logger.WarnContext(ctx, "MCP over HTTP without authentication: every local process can run code as the default tenant; "+
			"give --tokens-file or --jwt-issuer to require tokens", logkeys.Address, lis.Addr().String())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	g.logger.Info("shutting down: refusing new calls", "grace", grace)
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	_ = g.Drain(drainCtx)
	cancel()
	// The finished calls' responses are written; open event streams are
	// cut after a short wait.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// HTTPHandler returns the streamable HTTP transport, to mount at /mcp.
//
// Both protocol eras are served on it, decided per request. Under the
// session-based revisions (up to 2025-11-25) an MCP session maps to a
// sandbox session whose handle is derived from the tenant and the MCP
// session ID, so that a client that keeps its Mcp-Session-Id across a
// restart of the gateway, or reaches another gateway, continues its
// sandbox session; a DELETE that ends it destroys that sandbox session.
// Under 2026-07-28 there are no protocol sessions: run_python continues
// the session its `session` argument names, or starts one and returns the
// handle.
//
// A request in an MCP session runs to its end even if its connection
// drops, as the session-based revisions ask; under 2026-07-28 a dropped
// stream cancels its request. See mcpfix.Detach.
//
// Requests pass the guard first: Host and Origin checks against DNS
// rebinding, then authentication when Config.Auth enables it (see
// HTTPAuth); the credentials decide the tenant.
func (g *Gateway) HTTPHandler() http.Handler {
	g.httpOnce.Do(func() {
		inner := server.NewStreamableHTTPServer(g.mcp,
			server.WithStreamableHTTPLogger(g.logger),
			server.WithSessionIdleTTL(g.cfg.SessionIdleTimeout),
			// The guard checks Host itself, against a configurable list.
			server.WithDisableLocalhostProtection(true),
		)
		// The answers mcp-go does not give (batches, requests outside a
		// session, foreign cursors, unknown resources, listen
		// acknowledgements; see mcpfix), behind the body limiter: mcp-go
		// reads a whole body into memory and parses it, with no limit, so
		// each body is read, bounded and counted first (bodylimit).
		// The tasks extension of 2026-07-28 is answered before mcp-go,
		// which knows only the tasks of 2025-11-25; see tasks.
		withTasks := tasks.Handler(inner, g.tool, func(ctx context.Context) string { return auth.Tenant(ctx, g.cfg.Tenant) })
		mcpHandler := mcpfix.HTTP(withTasks, func(next http.Handler) http.Handler {
			return bodylimit.Handler(next, bodylimit.Options{
				Limits: g.cfg.HTTP.bodyLimits(), Budget: g.bodies,
				Tenant:  func(r *http.Request) string { return auth.Tenant(r.Context(), g.cfg.Tenant) },
				Refused: func(reason string) { g.metrics.BodyRefused.WithLabelValues(reason).Inc() },
				Hint: fmt.Sprintf(
					"run_python takes at most %d bytes (%d MiB) of code, as JSON with its escapes within this body: do not inline large data in the code, but write it to a file under /workspace in smaller calls, or fetch it from inside the sandbox",
					params.MaxCodeBytes, params.MaxCodeBytes>>20),
			})
		})
		g.http = g.guard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// An MCP session over HTTP has a derived handle; see
			// sessions.HandleFor.
			r = r.WithContext(sessions.OverHTTP(r.Context()))
			w = withWriteDeadline(w, g.cfg.HTTP.WriteTimeout)
			// The URL may ask for another tool surface.
			r, ok := g.connectionSurface(w, r)
			if !ok {
				return
			}
			// A session-based client's call outlives its connection;
			// see mcpfix.Detach.
			w, r = mcpfix.Detach(w, r)
			stop, _ := mcpfix.OnGone(r.Context(), func() {
				g.logger.Info("the client's connection closed before the answer was sent; the request runs to its end, since before MCP 2026-07-28 only notifications/cancelled cancels one",
					logkeys.MCPSession, r.Header.Get(server.HeaderKeySessionID))
			})
			defer stop()
			mcpHandler.ServeHTTP(w, r)
			// mcp-go unregisters only sessions it registered; a session
			// that outlived a gateway restart, or went through another
			// gateway, is ended here alone, by its derived handle.
			if id := r.Header.Get(server.HeaderKeySessionID); r.Method == http.MethodDelete && id != "" {
				g.sessions.EndFor(r.Context(), auth.Tenant(r.Context(), g.cfg.Tenant), id)
				g.owners.Ended(id)
			}
		}))
	})
	return g.http
}

// ProtectedResourceHandler serves the OAuth protected-resource metadata
// (RFC 9728) that MCP clients read to find the authorization server. Mount
// it at /.well-known/oauth-protected-resource and at that path followed by
// the MCP endpoint's path.
func (g *Gateway) ProtectedResourceHandler() http.Handler { return g.guard.ProtectedResource() }

// MetricsGuard protects a /metrics handler served on the MCP listener.
// Metrics name upstream servers, including those limited to some tenants,
// so with authentication on they go only to loopback peers and to bearers
// of a token whose tenant is listed in HTTPAuth.MetricsTenants. Without
// authentication the handler is returned as is.
func (g *Gateway) MetricsGuard(h http.Handler) http.Handler { return g.guard.Metrics(h) }

// Authenticates reports whether HTTP requests must carry credentials.
func (g *Gateway) Authenticates() bool { return g.guard.Authenticates() }
