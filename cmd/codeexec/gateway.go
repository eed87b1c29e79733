package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/cmd/codeexec/internal/localsock"
	"github.com/codeexec/codeexec/cmd/codeexec/internal/process"
	"github.com/codeexec/codeexec/gateway"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/services/flagenv"
)

// gatewayUnit is the gateway's settings: the MCP surface, its HTTP
// transport and, alone, where sandboxd is.
type gatewayUnit struct {
	cfg gateway.Config
	hs  httpSettings
	// sandbox and balance say where sandboxd is, alone, and discovery
	// where discoveryd is (for the passthrough tools).
	sandbox, balance, discovery string
	// tenantCalls are the --tenant-max-tool-calls values, TENANT=N, and
	// tenantTimeouts the --tenant-max-timeout ones, TENANT=DURATION.
	tenantCalls, tenantTimeouts []string
	// stateKey is --request-state-key-file; stateDir, in serve, is where
	// the key is kept when it is not given.
	stateKey, stateDir string
	// addr is where MCP is served over HTTP; "" serves stdio. lis is
	// addr bound, by listen.
	addr string
	lis  net.Listener
	g    *gateway.Gateway
}

func (u *gatewayUnit) bind(fs *flagenv.Set, _ cli.Env, alone bool) {
	bindGateway(fs, &u.cfg)
	fs.Strings(&u.tenantCalls, "tenant-max-tool-calls", "TENANT=N: the most tool calls one run_python call of that tenant makes, instead of --max-tool-calls", "CODEEXEC_TENANT_MAX_TOOL_CALLS")
	fs.Strings(&u.tenantTimeouts, "tenant-max-timeout", "TENANT=DURATION: the largest timeout a run_python call of that tenant may ask for, when lower than --max-timeout", "CODEEXEC_TENANT_MAX_TIMEOUT")
	fs.Path(&u.stateKey, "request-state-key-file", "file of the secret that signs the requestState of input_required results (2026-07-28 approvals); gateways that take each other's retries need the same; empty: in serve, "+stateKeyName+" in the state dir, made at first start; alone, a random key per process", "CODEEXEC_REQUEST_STATE_KEY_FILE")
	bindHTTP(fs, &u.hs, &u.cfg)
	if !alone {
		return // in serve, sandboxd's settings give the output cap and the idle timeout
	}
	d := sandboxd.DefaultConfig()
	fs.Bytes(&u.cfg.OutputLimitBytes, "output-limit", d.OutputLimitBytes, "sandboxd's output cap, quoted in truncation notes", "CODEEXEC_OUTPUT_LIMIT")
	fs.Duration(&u.cfg.SessionIdleTimeout, "idle-timeout", d.IdleTimeout, "end HTTP sessions idle this long; 0 never does", "CODEEXEC_IDLE_TIMEOUT")
	fs.String(&u.sandbox, "sandbox", "127.0.0.1:9002",
		"sandboxd address: host:port or unix:/path; several replicas as host:port,host:port or dns:///name:port (every address of name, re-resolved every 5s)",
		"CODEEXEC_SANDBOXD_ADDR")
	fs.String(&u.balance, "balance", gateway.BalanceLeastLoaded, "how new sessions pick a sandboxd replica: least-loaded or round-robin", "CODEEXEC_SANDBOX_BALANCE")
	fs.String(&u.discovery, "discovery", "", "discoveryd address, for the passthrough tools (--tools passthrough or both, ?tools= on the URL); empty: run_python alone", "CODEEXEC_DISCOVERYD_ADDR")
}

func (u *gatewayUnit) check() error {
	addr, err := u.hs.finish(&u.cfg)
	if err != nil {
		return err
	}
	u.addr = addr
	u.cfg.Version = buildVersion()
	if u.cfg.TenantMaxToolCalls, err = tenantCounts("--tenant-max-tool-calls", u.tenantCalls); err != nil {
		return err
	}
	if u.cfg.TenantMaxTimeout, err = tenantDurations("--tenant-max-timeout", u.tenantTimeouts); err != nil {
		return err
	}
	if u.cfg.Yield == 0 {
		u.cfg.Yield = -1 // --yield 0: never; the Config's zero is the default
	}
	return u.cfg.Validate()
}

// tenantCounts reads TENANT=N values.
func tenantCounts(flag string, vs []string) (map[string]int, error) {
	out := map[string]int{}
	for _, v := range vs {
		tenant, n, ok := strings.Cut(v, "=")
		count, err := strconv.Atoi(strings.TrimSpace(n))
		if !ok || err != nil || count < 0 || gateway.ValidTenant(strings.TrimSpace(tenant)) != nil {
			return nil, fmt.Errorf("%s %q: want TENANT=N, a tenant name and a whole number (0 for no limit), e.g. alice=50", flag, v)
		}
		out[strings.TrimSpace(tenant)] = count
	}
	return out, nil
}

// tenantDurations reads TENANT=DURATION values (30s, 10m, or bare
// seconds).
func tenantDurations(flag string, vs []string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, v := range vs {
		tenant, ds, ok := strings.Cut(v, "=")
		tenant, ds = strings.TrimSpace(tenant), strings.TrimSpace(ds)
		d, err := time.ParseDuration(ds)
		if n, nerr := strconv.ParseFloat(ds, 64); err != nil && nerr == nil {
			d, err = time.Duration(n*float64(time.Second)), nil
		}
		if !ok || err != nil || d < time.Second || gateway.ValidTenant(tenant) != nil {
			return nil, fmt.Errorf("%s %q: want TENANT=DURATION, a tenant name and at least 1s, e.g. alice=10m", flag, v)
		}
		out[tenant] = d
	}
	return out, nil
}

// listen binds the HTTP address, if there is one, once.
func (u *gatewayUnit) listen(p *process.Process) error {
	if u.addr == "" || u.lis != nil {
		return nil
	}
	lis, err := gateway.Listen(u.addr)
	if err != nil {
		return err
	}
	p.OnClose(func() { _ = lis.Close() })
	u.lis = lis
	return nil
}

// where is what MCP is served on, for the log: stdio or the bound address.
func (u *gatewayUnit) where() (transport, address string) {
	if u.lis == nil {
		return "stdio", ""
	}
	return "http", u.lis.Addr().String()
}

func (u *gatewayUnit) start(ctx context.Context, p *process.Process) error {
	if err := u.listen(p); err != nil {
		return err
	}
	var sandbox sandboxv1.SandboxServiceClient
	if p.InProc != nil {
		sandbox = sandboxv1.NewSandboxServiceClient(p.InProc.Conn)
	} else {
		c, closeSandbox, err := gateway.DialSandbox(ctx, u.sandbox, u.balance, p.Logger, p.Creds.DialOptions()...)
		if err != nil {
			return err
		}
		p.OnClose(closeSandbox)
		sandbox = c
	}
	disc, err := p.Dial(u.discovery, "--discovery")
	if err != nil {
		return err
	}
	if disc != nil {
		u.cfg.Discovery = discoveryv1.NewDiscoveryServiceClient(disc)
	}
	if err := u.loadStateKey(); err != nil {
		return err
	}
	u.cfg.Registerer = p.Registry
	u.cfg.DialReplica = localsock.DialReplica(p.Creds.DialOptions())
	g, err := gateway.New(u.cfg, sandbox, p.ServiceLogger("gateway"))
	if err != nil {
		return err
	}
	// At exit, before the sandboxes go, its sessions are destroyed.
	p.OnClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = g.Close(ctx)
	})
	u.g = g
	return nil
}

// loadStateKey reads --request-state-key-file or, in serve, the state
// dir's key, made if missing.
func (u *gatewayUnit) loadStateKey() (err error) {
	switch {
	case u.stateKey != "":
		u.cfg.StateKey, err = readStateKey(u.stateKey, false)
	case u.stateDir != "":
		u.cfg.StateKey, err = readStateKey(filepath.Join(u.stateDir, stateKeyName), true)
	}
	return err
}

func (u *gatewayUnit) serve(ctx context.Context, p *process.Process, e cli.Env) error {
	if u.addr == "" {
		return u.g.ServeStdio(ctx, e.Stdin, e.Stdout)
	}
	return u.g.Serve(ctx, u.lis, u.hs.shutdownGrace, p.Registry)
}

// bindGateway binds the MCP surface's settings.
func bindGateway(fs *flagenv.Set, c *gateway.Config) {
	fs.Duration(&c.DefaultTimeout, "timeout", 30*time.Second, "default run_python timeout", "MCP_BRIDGE_TIMEOUT")
	fs.Duration(&c.MaxTimeout, "max-timeout", gateway.DefaultMaxTimeout, "largest run_python timeout; larger requests are refused with this maximum", "MCP_BRIDGE_MAX_TIMEOUT")
	fs.Duration(&c.Yield, "yield", gateway.DefaultYield, "a call still running after this long returns status \"running\" and its code runs on (below the MCP client's request timeout: 60s for Claude Code); 0 never yields", "CODEEXEC_YIELD")
	fs.String(&c.OutputMode, "output-mode", "compact", "result format: compact or toon (any other value renders toon, as upstream does, with a warning)", "MCP_BRIDGE_OUTPUT_MODE")
	fs.String(&c.Tenant, "tenant", "default", "tenant for memory, saved tools and sessions", "CODEEXEC_TENANT")
	fs.String(&c.Tools, "tools", gateway.ToolsRunPython, "the tools offered: run_python; passthrough (search_tools, describe_tool, call_tool, for clients that write their own code: no sandbox); or both. Over HTTP a connection may ask with ?tools= on the URL", "CODEEXEC_TOOLS")
	fs.Int(&c.MaxToolCalls, "max-tool-calls", 0, "most MCP tool calls one run_python call makes; the next raises an error naming the limit; 0 means no limit", "CODEEXEC_MAX_TOOL_CALLS")
}

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
	fs.String(&h.addr, "http", "", "serve MCP over streamable HTTP at ADDR/mcp instead of stdio; a bare :PORT binds 127.0.0.1, port 0 a free port (named in the log)", "CODEEXEC_HTTP")
	fs.Path(&a.TokensFile, "tokens-file", "file of accepted bearer tokens, one \"sha256:<hex> TENANT\" per line (make lines with: codeexec token add TENANT); reloaded on change", "CODEEXEC_TOKENS_FILE")
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
	d := gateway.DefaultHTTPLimits
	fs.Bytes(&c.HTTP.MaxInFlight, "http-max-inflight", d.MaxInFlight, "most bytes of HTTP request bodies held at once, every tenant's together (each body is at most 64 MiB)", "CODEEXEC_HTTP_MAX_INFLIGHT")
	fs.Bytes(&c.HTTP.TenantInFlight, "http-tenant-inflight", d.TenantInFlight, "most bytes of HTTP request bodies one tenant has held at once", "CODEEXEC_HTTP_TENANT_INFLIGHT")
	fs.Duration(&c.HTTP.BodyTimeout, "http-body-timeout", d.BodyTimeout, "how long a request body may take to arrive", "CODEEXEC_HTTP_BODY_TIMEOUT")
	fs.Duration(&c.HTTP.IdleTimeout, "http-idle-timeout", d.IdleTimeout, "how long an idle keep-alive connection stays open", "CODEEXEC_HTTP_IDLE_TIMEOUT")
	fs.Duration(&c.HTTP.WriteTimeout, "http-write-timeout", d.WriteTimeout, "how long one write of an answer may stall (a client that stops reading)", "CODEEXEC_HTTP_WRITE_TIMEOUT")
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
