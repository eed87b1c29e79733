package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
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
