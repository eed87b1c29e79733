package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/server"

	"github.com/codeexec/codeexec/gateway/internal/auth"
	"github.com/codeexec/codeexec/services/logkeys"
)

// HTTPAuth configures who may use the HTTP transport. Static tokens and
// JWTs can be used together; a token is accepted if either accepts it.
type HTTPAuth struct {
	// TokensFile lists accepted static tokens, hashed, each with its
	// tenant ("sha256:<hex> TENANT" per line; see HashToken). It is read
	// again when it changes.
	TokensFile string
	// JWTIssuer, JWKSURL and JWTAudience enable JWTs from an OAuth
	// authorization server: signed by a key in its JWKS, issued by it, for
	// this audience, and not expired.
	JWTIssuer   string
	JWKSURL     string
	JWTAudience string
	// TenantClaim names the JWT claim that is the tenant (default "sub").
	TenantClaim string
	// ResourceURL is this server's MCP endpoint as clients reach it, e.g.
	// https://mcp.example.com/mcp: the "resource" of the protected-resource
	// metadata. Empty derives it from each request's Host.
	ResourceURL string
	// Disabled serves without authentication: every caller is Config.Tenant.
	Disabled bool
	// AllowedHosts are Host header values accepted besides loopback names
	// and ResourceURL's host: "name" (any port), "name:port" or "*" (any). Without authentication only
	// these are accepted, which defeats DNS rebinding; with authentication
	// an empty list accepts any host, since a rebinding page has no token.
	AllowedHosts []string
	// AllowedOrigins are browser origins (scheme://host[:port]) accepted
	// besides loopback ones and ResourceURL's ("*" accepts any). A request
	// with any other Origin header is refused with 403.
	AllowedOrigins []string
	// MetricsTenants may read /metrics from other hosts with their token;
	// loopback peers always may (see MetricsGuard).
	MetricsTenants []string
}

// Enabled reports whether some authentication method is configured.
func (a HTTPAuth) Enabled() bool { return !a.Disabled && (a.TokensFile != "" || a.JWTIssuer != "") }

// Validate reports contradictions and missing pieces.
func (a HTTPAuth) Validate() error {
	var errs []error
	if a.Disabled && (a.TokensFile != "" || a.JWTIssuer != "") {
		errs = append(errs, errors.New("authentication is both configured and disabled (--insecure-no-auth); choose one"))
	}
	if a.JWTIssuer != "" || a.JWKSURL != "" || a.JWTAudience != "" {
		if err := (auth.JWTConfig{Issuer: a.JWTIssuer, JWKSURL: a.JWKSURL, Audience: a.JWTAudience}).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("JWT authentication needs an issuer, a JWKS URL and an audience: %w", err))
		}
	}
	if a.ResourceURL != "" {
		if u, err := url.Parse(a.ResourceURL); err != nil || !u.IsAbs() || u.Host == "" {
			errs = append(errs, fmt.Errorf("resource URL %q: want an absolute URL such as https://mcp.example.com/mcp", a.ResourceURL))
		}
	}
	return errors.Join(errs...)
}

// HashToken returns how a token is written in a tokens file.
func HashToken(token string) string { return auth.Hash(token) }

// ValidTenant checks a tenant name as the tokens file does.
func ValidTenant(t string) error { return auth.ValidTenant(t) }

// Authenticates reports whether HTTP requests must carry credentials.
func (g *Gateway) Authenticates() bool { return g.authn != nil }

// newAuthenticator builds the configured authenticator, or nil when
// authentication is off.
func newAuthenticator(a HTTPAuth) (auth.Authenticator, error) {
	if !a.Enabled() {
		return nil, nil
	}
	var chain auth.Chain
	if a.TokensFile != "" {
		f, err := auth.NewTokenFile(a.TokensFile)
		if err != nil {
			return nil, err
		}
		chain = append(chain, f)
	}
	if a.JWTIssuer != "" {
		j, err := auth.NewJWT(auth.JWTConfig{Issuer: a.JWTIssuer, JWKSURL: a.JWKSURL, Audience: a.JWTAudience, TenantClaim: a.TenantClaim}, nil)
		if err != nil {
			return nil, err
		}
		chain = append(chain, j)
	}
	return chain, nil
}

type tenantKey struct{}

// withTenant returns ctx carrying the caller's tenant.
func withTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// tenantOf returns the caller's tenant: the one its credentials name, or the
// configured tenant for unauthenticated transports (stdio).
func (g *Gateway) tenantOf(ctx context.Context) string {
	if t, ok := ctx.Value(tenantKey{}).(string); ok && t != "" {
		return t
	}
	return g.cfg.Tenant
}

// guard wraps the MCP handler: it checks Host and Origin, authenticates,
// and keeps each MCP session to the tenant that opened it.
func (g *Gateway) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := g.checkOrigin(r); msg != "" {
			g.metrics.denied.WithLabelValues("origin").Inc()
			g.logger.Warn("HTTP request refused", "http.host", r.Host, "http.origin", r.Header.Get("Origin"), logkeys.Error, msg)
			http.Error(w, "Forbidden: "+msg, http.StatusForbidden)
			return
		}
		tenant := g.cfg.Tenant
		if g.authn != nil {
			token, ok := bearer(r)
			if !ok {
				g.metrics.denied.WithLabelValues("missing_token").Inc()
				g.unauthorized(w, r, "")
				return
			}
			t, err := g.authn.Authenticate(r.Context(), token)
			if err != nil {
				g.metrics.denied.WithLabelValues("invalid_token").Inc()
				g.logger.Info("HTTP request not authenticated", logkeys.Error, err)
				g.unauthorized(w, r, "invalid_token")
				return
			}
			tenant = t
		}
		if id := r.Header.Get(server.HeaderKeySessionID); id != "" && !g.owns(tenant, id) {
			// The same answer as for a session that does not exist, so a
			// tenant learns nothing about another's sessions.
			g.metrics.denied.WithLabelValues("session").Inc()
			http.Error(w, "Invalid session ID", http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r.WithContext(withTenant(r.Context(), tenant)))
	})
}

// bearer extracts the token of an "Authorization: Bearer" header.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}

// unauthorized answers 401 as the MCP authorization spec asks: the
// WWW-Authenticate header points at the protected-resource metadata.
func (g *Gateway) unauthorized(w http.ResponseWriter, r *http.Request, code string) {
	v := fmt.Sprintf(`Bearer realm="codeexec", resource_metadata=%q`, g.metadataURL(r))
	if code != "" {
		v += fmt.Sprintf(`, error=%q, error_description="the token is not valid or has expired"`, code)
	}
	w.Header().Set("WWW-Authenticate", v)
	http.Error(w, "Unauthorized: send a valid token as \"Authorization: Bearer <token>\"", http.StatusUnauthorized)
}

// resource is the protected resource's identifier for a request.
func (g *Gateway) resource(r *http.Request) string {
	if g.cfg.Auth.ResourceURL != "" {
		return g.cfg.Auth.ResourceURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/mcp"
}

func (g *Gateway) metadataURL(r *http.Request) string {
	res := g.resource(r)
	u, err := url.Parse(res)
	if err != nil {
		return res
	}
	u.Path, u.RawQuery, u.Fragment = server.ProtectedResourceMetadataPath(res), "", ""
	return u.String()
}

// ProtectedResourceHandler serves the OAuth protected-resource metadata
// (RFC 9728) that MCP clients read to find the authorization server. Mount
// it at /.well-known/oauth-protected-resource and at that path followed by
// the MCP endpoint's path.
func (g *Gateway) ProtectedResourceHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := g.checkOrigin(r); msg != "" {
			http.Error(w, "Forbidden: "+msg, http.StatusForbidden)
			return
		}
		cfg := server.ProtectedResourceMetadataConfig{
			Resource:               g.resource(r),
			BearerMethodsSupported: []string{"header"},
			ResourceName:           ServerName,
		}
		if g.cfg.Auth.JWTIssuer != "" {
			cfg.AuthorizationServers = []string{g.cfg.Auth.JWTIssuer}
		}
		server.NewProtectedResourceMetadataHandler(cfg).ServeHTTP(w, r)
	})
}

// checkOrigin returns why a request's Host or Origin is refused, or "".
func (g *Gateway) checkOrigin(r *http.Request) string {
	a := g.cfg.Auth
	resHost := ""
	if u, err := url.Parse(a.ResourceURL); err == nil && a.ResourceURL != "" {
		resHost = u.Host
	}
	hostOK := loopbackName(r.Host) || strings.EqualFold(r.Host, resHost) ||
		listed(a.AllowedHosts, r.Host) || listed(a.AllowedHosts, hostOnly(r.Host)) ||
		(g.authn != nil && len(a.AllowedHosts) == 0)
	if !hostOK {
		return fmt.Sprintf("Host %q is not allowed; add it to the allowed hosts", r.Host)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err == nil && u.Host != "" && (loopbackName(u.Host) || strings.EqualFold(u.Host, resHost)) {
		return ""
	}
	if listed(a.AllowedOrigins, strings.TrimSuffix(origin, "/")) {
		return ""
	}
	return fmt.Sprintf("Origin %q is not allowed; add it to the allowed origins", origin)
}

// loopbackName reports whether host[:port] names this machine: localhost
// or a loopback IP.
func loopbackName(hostport string) bool {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.Trim(h, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// hostOnly drops the port of host:port, so that a listed name matches on
// any port.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

func listed(list []string, v string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return s == "*" || strings.EqualFold(s, v) })
}

// owns reports whether tenant may use the MCP session id: sessions begun
// in this process belong to the tenant that initialised them. Sessions of
// an earlier process are unknown here; the session table's per-tenant keys
// still keep them apart.
func (g *Gateway) owns(tenant, id string) bool {
	g.ownersMu.Lock()
	defer g.ownersMu.Unlock()
	owner, ok := g.owners[id]
	return !ok || owner == tenant
}

func (g *Gateway) setOwner(id, tenant string) {
	g.ownersMu.Lock()
	defer g.ownersMu.Unlock()
	g.owners[id] = tenant
}

func (g *Gateway) dropOwner(id string) {
	g.ownersMu.Lock()
	defer g.ownersMu.Unlock()
	delete(g.owners, id)
}
