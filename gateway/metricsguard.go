package gateway

import (
	"net"
	"net/http"
	"slices"
)

// MetricsGuard protects a /metrics handler served on the MCP listener.
// Metrics name upstream servers, including those limited to some tenants,
// so with authentication on they go only to loopback peers (a local agent
// or sidecar) and to bearers of a token whose tenant is listed in
// HTTPAuth.MetricsTenants. Without authentication the handler is returned
// as is.
func (g *Gateway) MetricsGuard(h http.Handler) http.Handler {
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
		token, ok := bearer(r)
		if !ok {
			g.metrics.denied.WithLabelValues("missing_token").Inc()
			g.unauthorized(w, r, "")
			return
		}
		tenant, err := g.authn.Authenticate(r.Context(), token)
		if err != nil {
			g.metrics.denied.WithLabelValues("invalid_token").Inc()
			g.unauthorized(w, r, "invalid_token")
			return
		}
		if !slices.Contains(g.cfg.Auth.MetricsTenants, tenant) {
			http.Error(w, "Forbidden: this token may not read metrics", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
