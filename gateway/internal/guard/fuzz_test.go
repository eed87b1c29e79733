package guard

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/gateway/internal/auth"
	"github.com/codeexec/codeexec/gateway/internal/metrics"
)

// FuzzBearer sends requests with arbitrary Authorization, Host and Origin
// headers through a guard that accepts one token. It must not panic; a
// request reaches the handler only with that token (as the bearer
// scheme, in any case, with any white space around it), from a Host the
// guard allows, and then as the token's tenant; and whatever bearer()
// accepts is a trimmed token that reads back the same from a header of
// its own.
func FuzzBearer(f *testing.F) {
	for _, h := range [][3]string{
		{"Bearer secret", "127.0.0.1:8080", ""},
		{"bearer   secret  ", "localhost", "http://localhost:3000"},
		{"Basic c2VjcmV0", "127.0.0.1", ""},
		{"Bearer", "[::1]:80", ""},
		{"Bearer secret", "evil.example", ""},
		{"Bearer secret", "mcp.example.com:443", "https://evil.example"},
		{"Bearer sec ret", "mcp.example.com", "https://mcp.example.com/"},
		{"", "", ""},
	} {
		f.Add(h[0], h[1], h[2])
	}
	tokens := filepath.Join(f.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(auth.Hash("secret")+" acme\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	g, err := New(Options{
		Config: Config{TokensFile: tokens, AllowedHosts: []string{"mcp.example.com"}, AllowedOrigins: []string{"https://mcp.example.com"}},
		Tenant: "default", Owns: func(string, string) bool { return true },
		Metrics: metrics.New(), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, authorization, host, origin string) {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
		r.Host = host
		r.Header.Set("Authorization", authorization)
		r.Header.Set("Origin", origin)

		token, ok := bearer(r)
		if ok {
			if token == "" || token != strings.TrimSpace(token) {
				t.Errorf("bearer(%q) = %q, not a trimmed token", authorization, token)
			}
			again := httptest.NewRequest(http.MethodGet, "/", nil)
			again.Header.Set("Authorization", "Bearer "+token)
			if back, ok := bearer(again); !ok || back != token {
				t.Errorf("token %q reads back as %q, %v", token, back, ok)
			}
		}

		reached := ""
		w := httptest.NewRecorder()
		g.Wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			reached = auth.Tenant(r.Context(), "none")
		})).ServeHTTP(w, r)
		hostAllowed := loopbackName(host) || strings.EqualFold(hostOnly(host), "mcp.example.com")
		switch {
		case reached == "":
		case reached != "acme":
			t.Errorf("reached the handler as tenant %q", reached)
		case !ok || token != "secret":
			t.Errorf("Authorization %q reached the handler", authorization)
		case !hostAllowed:
			t.Errorf("Host %q reached the handler", host)
		}
	})
}
