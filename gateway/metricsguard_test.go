package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestMetricsGuard(t *testing.T) {
	t.Parallel()
	_, g, _ := authServer(t, func(c *Config) { c.Auth.MetricsTenants = []string{"beta"} })
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics") })
	h := g.MetricsGuard(ok)
	for _, tc := range []struct {
		name, remote, token string
		want                int
	}{
		{"loopback peer", "127.0.0.1:5000", "", 200},
		{"remote, no token", "10.0.0.7:5000", "", 401},
		{"remote, wrong token", "10.0.0.7:5000", "nope", 401},
		{"remote, tenant not allowed", "10.0.0.7:5000", "alpha-token", 403},
		{"remote, metrics tenant", "10.0.0.7:5000", "beta-token", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/metrics", nil)
			r.RemoteAddr = tc.remote
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("status %d, want %d", w.Code, tc.want)
			}
		})
	}
	// Without authentication there is nothing to guard.
	open, _ := newTestGateway(t, Config{})
	r := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/metrics", nil)
	r.RemoteAddr = "10.0.0.7:5000"
	w := httptest.NewRecorder()
	open.MetricsGuard(ok).ServeHTTP(w, r)
	if w.Code != 200 {
		t.Errorf("without authentication: status %d, want 200", w.Code)
	}
}
