// Package guard is what every HTTP request to the gateway passes before
// mcp-go sees it: Host and Origin checks against DNS rebinding,
// authentication by bearer token (a 401 points at the RFC 9728
// protected-resource metadata, which this package serves too), and the
// rule that an MCP session belongs to the tenant that opened it. It also
// guards /metrics.
package guard

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/server"

	"github.com/codeexec/codeexec/gateway/internal/auth"
	"github.com/codeexec/codeexec/gateway/internal/metrics"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/ratelog"
)

// Options configure a Guard.
type Options struct {
	// Config says who may call.
	Config Config
	// Tenant is every caller's tenant when authentication is off.
	Tenant string
	// ResourceName names the server in the protected-resource metadata.
	ResourceName string
	// Owns reports whether tenant may use the MCP session mcpID.
	Owns func(tenant, mcpID string) bool
	// Metrics counts refusals.
	Metrics *metrics.Metrics
	// Logger logs refusals.
	Logger *slog.Logger
}

// Guard checks HTTP requests; see the package comment.
type Guard struct {
	opts  Options
	authn auth.Authenticator // nil: authentication is off
	// logs keeps refusals, which anyone who reaches the port can cause
	// (with any Host, Origin or token), from flooding the log.
	logs ratelog.Limiter
}

// New builds a Guard, opening the tokens file or preparing the JWT
// validator that opts.Config names.
func New(opts Options) (*Guard, error) {
	authn, err := opts.Config.authenticator()
	if err != nil {
		return nil, err
	}
	return &Guard{opts: opts, authn: authn}, nil
}

// Authenticates reports whether requests must carry credentials.
func (g *Guard) Authenticates() bool { return g.authn != nil }

// Wrap returns next behind the guard: it checks Host and Origin,
// authenticates, keeps each MCP session to the tenant that opened it, and
// passes the tenant on in the request's context (auth.Tenant).
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := g.checkOrigin(r); msg != "" {
			g.opts.Metrics.Denied.WithLabelValues(metrics.DeniedOrigin).Inc()
			g.logs.Warn(r.Context(), g.opts.Logger, "HTTP request refused", "http.host", r.Host, "http.origin", r.Header.Get("Origin"), logkeys.Error, msg)
			http.Error(w, "Forbidden: "+msg, http.StatusForbidden)
			return
		}
		tenant := g.opts.Tenant
		if g.authn != nil {
			t, ok := g.authenticate(w, r)
			if !ok {
				return
			}
			tenant = t
		}
		if id := r.Header.Get(server.HeaderKeySessionID); id != "" && !g.opts.Owns(tenant, id) {
			// The same answer as for a session that does not exist, so a
			// tenant learns nothing about another's sessions.
			g.opts.Metrics.Denied.WithLabelValues(metrics.DeniedSession).Inc()
			http.Error(w, "Invalid session ID", http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.WithTenant(r.Context(), tenant)))
	})
}

// Metrics protects a /metrics handler served on the MCP listener. Metrics
// name upstream servers, including those limited to some tenants, so with
// authentication on they go only to loopback peers (a local agent or
// sidecar) and to bearers of a token whose tenant is listed in
// Config.MetricsTenants. Without authentication h is returned as is.
func (g *Guard) Metrics(h http.Handler) http.Handler {
	if g.authn == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
				h.ServeHTTP(w, r)
				return
			}
		}
		tenant, ok := g.authenticate(w, r)
		if !ok {
			return
		}
		if !slices.Contains(g.opts.Config.MetricsTenants, tenant) {
			http.Error(w, "Forbidden: this token may not read metrics", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// authenticate returns the tenant of the request's bearer token. Without
// a valid one it answers 401 and returns false.
func (g *Guard) authenticate(w http.ResponseWriter, r *http.Request) (string, bool) {
	token, ok := bearer(r)
	if !ok {
		g.opts.Metrics.Denied.WithLabelValues(metrics.DeniedMissingToken).Inc()
		g.unauthorized(w, r, "")
		return "", false
	}
	tenant, err := g.authn.Authenticate(r.Context(), token)
	if err != nil {
		g.opts.Metrics.Denied.WithLabelValues(metrics.DeniedInvalidToken).Inc()
		g.logs.Log(r.Context(), g.opts.Logger, slog.LevelInfo, "HTTP request not authenticated", logkeys.Error, err)
		g.unauthorized(w, r, "invalid_token")
		return "", false
	}
	return tenant, true
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
func (g *Guard) unauthorized(w http.ResponseWriter, r *http.Request, code string) {
	v := fmt.Sprintf(`Bearer realm="codeexec", resource_metadata=%q`, g.metadataURL(r))
	if code != "" {
		v += fmt.Sprintf(`, error=%q, error_description="the token is not valid or has expired"`, code)
	}
	w.Header().Set("WWW-Authenticate", v)
	http.Error(w, "Unauthorized: send a valid token as \"Authorization: Bearer <token>\"", http.StatusUnauthorized)
}

// resource is the protected resource's identifier for a request.
func (g *Guard) resource(r *http.Request) string {
	if g.opts.Config.ResourceURL != "" {
		return g.opts.Config.ResourceURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/mcp"
}

func (g *Guard) metadataURL(r *http.Request) string {
	res := g.resource(r)
	u, err := url.Parse(res)
	if err != nil {
		return res
	}
	u.Path, u.RawQuery, u.Fragment = server.ProtectedResourceMetadataPath(res), "", ""
	return u.String()
}

// ProtectedResource serves the OAuth protected-resource metadata (RFC
// 9728) that MCP clients read to find the authorization server.
func (g *Guard) ProtectedResource() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := g.checkOrigin(r); msg != "" {
			http.Error(w, "Forbidden: "+msg, http.StatusForbidden)
			return
		}
		cfg := server.ProtectedResourceMetadataConfig{
			Resource:               g.resource(r),
			BearerMethodsSupported: []string{"header"},
			ResourceName:           g.opts.ResourceName,
		}
		if g.opts.Config.JWTIssuer != "" {
			cfg.AuthorizationServers = []string{g.opts.Config.JWTIssuer}
		}
		server.NewProtectedResourceMetadataHandler(cfg).ServeHTTP(w, r)
	})
}
