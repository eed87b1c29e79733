package guard

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/gateway/internal/metrics"
)

// Refusals that anyone who reaches the port can cause are logged a few at
// a time, their values cut short: a flood of requests with a long Origin
// writes a few short lines, not one long line each.
func TestRefusalsDoNotFloodTheLog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	g, err := New(Options{
		Config: Config{AllowedHosts: []string{"mcp.example.com"}}, Tenant: "default",
		Owns: func(string, string) bool { return true }, Metrics: metrics.New(), Logger: slog.New(slog.NewTextHandler(&buf, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	h := g.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("a refused request was served") }))
	origin := "https://" + strings.Repeat("x", 20000) + ".example"
	for range 200 {
		r := httptest.NewRequest(http.MethodPost, "http://mcp.example.com/mcp", nil)
		r.Header.Set("Origin", origin)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusForbidden {
			t.Fatalf("a foreign origin: %d", w.Code)
		}
	}
	if lines := strings.Count(buf.String(), "\n"); lines > 10 || buf.Len() > 10000 {
		t.Errorf("200 refusals of a 20 kB Origin logged %d lines, %d bytes; want a few short ones", lines, buf.Len())
	}
}
