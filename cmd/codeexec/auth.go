package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/codeexec/codeexec/gateway"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/tracing"
)

// httpSettings are the options of MCP over HTTP: who may call, how much,
// and how the server stops.
type httpSettings struct {
	addr           string
	allowedHosts   string
	allowedOrigins string
	metricsTenants string
	shutdownGrace  time.Duration
}

// bindHTTP binds the HTTP transport's settings into the gateway config.
func bindHTTP(fs *flagenv.Set, h *httpSettings, c *gateway.Config) {
	a := &c.Auth
	fs.String(&h.addr, "http", "", "serve MCP over streamable HTTP at ADDR/mcp instead of stdio; a bare :PORT binds 127.0.0.1", "CODEEXEC_HTTP")
	fs.String(&a.TokensFile, "tokens-file", "", "file of accepted bearer tokens, one \"sha256:<hex> TENANT\" per line (make lines with: codeexec token add TENANT); reloaded on change", "CODEEXEC_TOKENS_FILE")
	fs.String(&a.JWTIssuer, "jwt-issuer", "", "accept JWTs from this OAuth issuer (its \"iss\"); needs --jwks-url and --jwt-audience", "CODEEXEC_JWT_ISSUER")
	fs.String(&a.JWKSURL, "jwks-url", "", "the issuer's JWKS URL, for checking JWT signatures", "CODEEXEC_JWKS_URL")
	fs.String(&a.JWTAudience, "jwt-audience", "", "the \"aud\" JWTs must carry: this server's resource URL", "CODEEXEC_JWT_AUDIENCE")
	fs.String(&a.TenantClaim, "jwt-tenant-claim", "sub", "the JWT claim that names the tenant", "CODEEXEC_JWT_TENANT_CLAIM")
	fs.String(&a.ResourceURL, "resource-url", "", "this server's public MCP URL, e.g. https://mcp.example.com/mcp; default: from each request's Host", "CODEEXEC_RESOURCE_URL")
	fs.Bool(&a.Disabled, "insecure-no-auth", false, "serve HTTP without authentication even on a non-loopback address (only behind something that authenticates)", "CODEEXEC_INSECURE_NO_AUTH")
	fs.String(&h.allowedHosts, "allowed-hosts", "", "comma-separated Host values accepted besides localhost (* for any); defends against DNS rebinding", "CODEEXEC_ALLOWED_HOSTS")
	fs.String(&h.allowedOrigins, "allowed-origins", "", "comma-separated browser origins accepted besides localhost ones (* for any)", "CODEEXEC_ALLOWED_ORIGINS")
	fs.String(&h.metricsTenants, "metrics-tenants", "", "with authentication on, tenants whose token may read /metrics from other hosts (loopback always may)", "CODEEXEC_METRICS_TENANTS")
	fs.Int(&c.Quotas.Sessions, "quota-sessions", 0, "most MCP sessions one tenant holds at once; 0 means no cap", "CODEEXEC_QUOTA_SESSIONS")
	fs.Int(&c.Quotas.Execs, "quota-execs", 0, "most run_python calls one tenant runs at once; 0 means no cap", "CODEEXEC_QUOTA_EXECS")
	fs.Int(&c.Quotas.ExecsPerMinute, "quota-execs-per-minute", 0, "most run_python calls one tenant starts per minute; 0 means no cap", "CODEEXEC_QUOTA_EXECS_PER_MINUTE")
	fs.Duration(&h.shutdownGrace, "shutdown-grace", 30*time.Second, "on SIGTERM, how long running calls may finish before they are stopped", "CODEEXEC_SHUTDOWN_GRACE")
}

// finish applies the list settings and checks the address against the
// authentication, returning the address to listen on.
func (h *httpSettings) finish(c *gateway.Config) (string, error) {
	c.Auth.AllowedHosts = splitList(h.allowedHosts)
	c.Auth.AllowedOrigins = splitList(h.allowedOrigins)
	c.Auth.MetricsTenants = splitList(h.metricsTenants)
	if h.addr == "" {
		return "", nil
	}
	return httpListenAddr(h.addr, c.Auth)
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// httpListenAddr resolves --http. A bare ":PORT" binds 127.0.0.1: serving
// every interface is a choice to be spelled out ("0.0.0.0:PORT"). A
// non-loopback address needs authentication, or --insecure-no-auth.
func httpListenAddr(addr string, a gateway.HTTPAuth) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--http %q: want HOST:PORT or :PORT: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !isLoopback(host) && !a.Enabled() && !a.Disabled {
		return "", fmt.Errorf("refusing to serve MCP over HTTP on %s without authentication: anyone who reaches it could run code "+
			"and use your MCP servers' credentials. Give --tokens-file or --jwt-issuer, bind a loopback address such as 127.0.0.1:%s, "+
			"or pass --insecure-no-auth if a proxy in front authenticates", addr, port)
	}
	return net.JoinHostPort(host, port), nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serveHTTP serves MCP at /mcp, the OAuth protected-resource metadata,
// metrics at /metrics and /healthz on one listener. When ctx ends it shuts
// down gracefully: new tool calls are refused, running ones get up to
// grace to finish, then the listener closes.
func serveHTTP(ctx context.Context, addr string, grace time.Duration, g *gateway.Gateway, reg *prometheus.Registry, logger *slog.Logger) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen for MCP over HTTP on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", g.HTTPHandler())
	mux.Handle("/.well-known/oauth-protected-resource", g.ProtectedResourceHandler())
	mux.Handle("/.well-known/oauth-protected-resource/", g.ProtectedResourceHandler())
	// Metrics name every upstream server, including tenant-limited ones.
	mux.Handle("/metrics", g.MetricsGuard(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("serving MCP over streamable HTTP", logkeys.Address, "http://"+lis.Addr().String()+"/mcp")
	if !g.Authenticates() {
		logger.Warn("MCP over HTTP without authentication: every local process can run code as the default tenant; "+
			"give --tokens-file or --jwt-issuer to require tokens", logkeys.Address, lis.Addr().String())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down: refusing new calls", "grace", grace)
	drainCtx, cancel := context.WithTimeout(context.Background(), grace)
	_ = g.Drain(drainCtx)
	cancel()
	// The finished calls' responses are written; open event streams are
	// cut after a short wait.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// runToken makes tokens-file lines: `codeexec token add TENANT` makes a
// random token, prints it once on stderr and the line to append on stdout;
// `codeexec token hash` reads a token from stdin and prints its hash.
func runToken(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 2 && args[0] == "add":
		if err := gateway.ValidTenant(args[1]); err != nil {
			return err
		}
		var b [32]byte
		_, _ = rand.Read(b[:])
		token := "cx_" + base64.RawURLEncoding.EncodeToString(b[:])
		line := gateway.HashToken(token) + " " + args[1]
		fmt.Fprintf(stderr, "token for tenant %s (shown once; give it to the client as \"Authorization: Bearer <token>\"):\n%s\n", args[1], token)
		fmt.Fprintln(stdout, line)
		return nil
	case len(args) == 1 && args[0] == "hash":
		token, err := bufio.NewReader(stdin).ReadString('\n')
		token = strings.TrimSpace(token)
		if token == "" {
			return fmt.Errorf("token hash: no token on stdin: %w", err)
		}
		fmt.Fprintln(stdout, gateway.HashToken(token))
		return nil
	}
	fmt.Fprint(stderr, "usage:\n  codeexec token add TENANT >> tokens   new random token for TENANT; the line for --tokens-file goes to stdout\n"+
		"  echo TOKEN | codeexec token hash     the sha256:<hex> form of an existing token\n")
	return errUsage
}

// startTracing exports traces when --otlp-endpoint is set; the returned
// function flushes them at exit.
func (c *commonSettings) startTracing(ctx context.Context, service string, logger *slog.Logger) (func(), error) {
	shutdown, err := tracing.Setup(ctx, c.otlp, service)
	if err != nil {
		return nil, err
	}
	if c.otlp != "" {
		logger.Info("exporting traces over OTLP", "otlp.endpoint", c.otlp)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			logger.Warn("flushing traces", logkeys.Error, err)
		}
	}, nil
}
