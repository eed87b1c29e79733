package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/server"

	"github.com/codeexec/codeexec/gateway/internal/sessions"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// authServer starts an HTTP gateway whose tokens file accepts "alpha-token"
// for tenant alpha and "beta-token" for tenant beta.
func authServer(t *testing.T, mod func(*Config)) (*httptest.Server, *Gateway, *fakeSandbox) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	tokens := HashToken("alpha-token") + " alpha\n" + HashToken("beta-token") + " beta\n"
	if err := os.WriteFile(path, []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Auth: HTTPAuth{TokensFile: path}}
	if mod != nil {
		mod(&cfg)
	}
	g, f := newTestGateway(t, cfg)
	mux := http.NewServeMux()
	mux.Handle("/mcp", g.HTTPHandler())
	mux.Handle("/.well-known/oauth-protected-resource/", g.ProtectedResourceHandler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, g, f
}

// reply is an HTTP response whose body was read and closed.
type reply struct {
	StatusCode int
	Header     http.Header
}

func post(t *testing.T, url string, header map[string]string) (reply, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(initBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return reply{StatusCode: resp.StatusCode, Header: resp.Header}, string(body)
}

func TestHTTPAuthentication(t *testing.T) {
	t.Parallel()
	srv, _, _ := authServer(t, nil)
	metadata := srv.URL + "/.well-known/oauth-protected-resource/mcp"
	for _, tc := range []struct {
		name       string
		header     map[string]string
		wantStatus int
		wantAuth   string
	}{
		{"no token", nil, 401, `Bearer realm="codeexec", resource_metadata="` + metadata + `"`},
		{"wrong token", map[string]string{"Authorization": "Bearer gamma-token"}, 401, `error="invalid_token"`},
		{"hash as token", map[string]string{"Authorization": "Bearer " + HashToken("alpha-token")}, 401, `error="invalid_token"`},
		{"basic scheme", map[string]string{"Authorization": "Basic YWxwaGE6eA=="}, 401, "resource_metadata="},
		{"good token", map[string]string{"Authorization": "Bearer alpha-token"}, 200, ""},
		{"scheme is case-insensitive", map[string]string{"Authorization": "bearer beta-token"}, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, srv.URL+"/mcp", tc.header)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tc.wantStatus, body)
			}
			if got := resp.Header.Get("WWW-Authenticate"); !strings.Contains(got, tc.wantAuth) || (tc.wantAuth == "") != (got == "") {
				t.Errorf("WWW-Authenticate = %q, want it to contain %q", got, tc.wantAuth)
			}
			if tc.wantStatus == 401 && (strings.Contains(body, "alpha") || strings.Contains(body, "beta")) {
				t.Errorf("the 401 body names a tenant: %s", body)
			}
		})
	}

	// The metadata the header points at is the RFC 9728 document.
	resp, err := http.Get(metadata)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || doc["resource"] != srv.URL+"/mcp" {
		t.Errorf("metadata = %v (%v), want resource %s/mcp", doc, err, srv.URL)
	}
}

func TestProtectedResourceMetadataNamesIssuer(t *testing.T) {
	t.Parallel()
	srv, _, _ := authServer(t, func(c *Config) {
		c.Auth.JWTIssuer, c.Auth.JWKSURL, c.Auth.JWTAudience = "https://issuer.test", "https://issuer.test/jwks", "https://mcp.test/mcp"
		c.Auth.ResourceURL = "https://mcp.test/mcp"
	})
	resp, body := post(t, srv.URL+"/mcp", map[string]string{"Host": "mcp.test"})
	if want := `resource_metadata="https://mcp.test/.well-known/oauth-protected-resource/mcp"`; !strings.Contains(resp.Header.Get("WWW-Authenticate"), want) {
		t.Errorf("WWW-Authenticate = %q, want %s (%s)", resp.Header.Get("WWW-Authenticate"), want, body)
	}
	r, err := http.Get(srv.URL + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var doc struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.NewDecoder(r.Body).Decode(&doc); err != nil || doc.Resource != "https://mcp.test/mcp" ||
		len(doc.AuthorizationServers) != 1 || doc.AuthorizationServers[0] != "https://issuer.test" {
		t.Errorf("metadata = %+v (%v)", doc, err)
	}
}

func TestOriginValidation(t *testing.T) {
	t.Parallel()
	open, _, _ := authServer(t, func(c *Config) {
		c.Auth = HTTPAuth{Disabled: true, AllowedOrigins: []string{"https://app.example"}, AllowedHosts: []string{"mcp.internal:8080", "proxy.internal"}}
	})
	authed, _, _ := authServer(t, nil)
	tok := "Bearer alpha-token"
	for _, tc := range []struct {
		name   string
		srv    *httptest.Server
		header map[string]string
		want   int
	}{
		{"loopback host", open, nil, 200},
		{"localhost host", open, map[string]string{"Host": "localhost:1234"}, 200},
		{"rebound host", open, map[string]string{"Host": "evil.example:1234"}, 403},
		{"listed host", open, map[string]string{"Host": "mcp.internal:8080"}, 200},
		{"listed host, other port", open, map[string]string{"Host": "mcp.internal:9090"}, 403},
		{"listed name, any port", open, map[string]string{"Host": "proxy.internal:1234"}, 200},
		{"foreign origin", open, map[string]string{"Origin": "https://evil.example/"}, 403},
		{"rebound origin and host", open, map[string]string{"Origin": "http://evil.example:1234", "Host": "evil.example:1234"}, 403},
		{"loopback origin", open, map[string]string{"Origin": "http://localhost:5173"}, 200},
		{"listed origin", open, map[string]string{"Origin": "https://app.example"}, 200},
		{"authenticated any host", authed, map[string]string{"Host": "mcp.example.com", "Authorization": tok}, 200},
		{"authenticated foreign origin", authed, map[string]string{"Origin": "https://evil.example", "Authorization": tok}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, tc.srv.URL+"/mcp", tc.header)
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d; body %s", resp.StatusCode, tc.want, body)
			}
		})
	}
	// A refusal names the setting that would accept what was refused.
	for header, want := range map[string]string{
		"Host":   `Forbidden: Host "evil.example:1234" is not allowed: the accepted ones are localhost, the loopback addresses, the host of --resource-url and those listed in --allowed-hosts (CODEEXEC_ALLOWED_HOSTS); add "evil.example" there to accept it`,
		"Origin": `Forbidden: Origin "https://evil.example/" is not allowed: the accepted ones are the origins on localhost or a loopback address, that of --resource-url and those listed in --allowed-origins (CODEEXEC_ALLOWED_ORIGINS); add "https://evil.example" there to accept it`,
	} {
		value := map[string]string{"Host": "evil.example:1234", "Origin": "https://evil.example/"}[header]
		if _, body := post(t, open.URL+"/mcp", map[string]string{header: value}); strings.TrimSpace(body) != want {
			t.Errorf("%s %s refused with %q, want %q", header, value, body, want)
		}
	}
}

// tenantClient is an HTTP MCP client sending token.
func tenantClient(t *testing.T, url, token string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestTenantsFromTokens(t *testing.T) {
	t.Parallel()
	srv, _, f := authServer(t, nil)
	a := tenantClient(t, srv.URL+"/mcp", "alpha-token")
	b := tenantClient(t, srv.URL+"/mcp", "beta-token")
	for _, c := range []*client.Client{a, b} {
		if res := call(t, c, ToolName, map[string]any{"code": "x"}); res.IsError {
			t.Fatalf("call failed: %s", textOf(t, res))
		}
	}
	created, _, execs := f.snapshot()
	got := map[string]string{}
	for _, c := range created {
		got[c.GetLabels()[sessions.LabelMCPSession]] = c.GetTenant()
	}
	if got[a.GetSessionId()] != "alpha" || got[b.GetSessionId()] != "beta" {
		t.Errorf("sandbox sessions by MCP session: %v; want alpha and beta", got)
	}
	for _, e := range execs {
		if e.GetTenant() != map[string]string{"sbx-1": created[0].GetTenant(), "sbx-2": created[1].GetTenant()}[e.GetSessionId()] {
			t.Errorf("Execute %s ran for tenant %q, not its session's", e.GetSessionId(), e.GetTenant())
		}
	}

	// Tenant beta presenting alpha's MCP session ID is told it does not
	// exist.
	for _, id := range []string{a.GetSessionId()} {
		resp, body := post(t, srv.URL+"/mcp", map[string]string{"Authorization": "Bearer beta-token", server.HeaderKeySessionID: id})
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("beta using session %q: status %d (%s), want 404", id, resp.StatusCode, body)
		}
	}
	if res := call(t, a, ToolName, map[string]any{"code": "still mine"}); res.IsError {
		t.Errorf("alpha's session broke: %s", textOf(t, res))
	}
}

func TestSessionKeysIncludeTenant(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	p := mustParams(t)
	// A session ID of an earlier process has no known owner; each tenant
	// using it still gets its own sandbox session.
	for _, tenant := range []string{"alpha", "beta", "alpha"} {
		if out := g.tool.Execute(t.Context(), tenant, "old-session", false, p, nil); out.Err != nil {
			t.Fatal(out.Err)
		}
	}
	created, _, _ := f.snapshot()
	if len(created) != 2 || created[0].GetTenant() != "alpha" || created[1].GetTenant() != "beta" {
		t.Errorf("created %v; want one sandbox session for alpha and one for beta", created)
	}
}

func TestDeleteEndsOnlyOwnTenantsSession(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	p := mustParams(t)
	for _, tenant := range []string{"alpha", "beta"} {
		if out := g.tool.Execute(t.Context(), tenant, "shared-id", false, p, nil); out.Err != nil {
			t.Fatal(out.Err)
		}
	}
	g.sessions.EndFor(t.Context(), "beta", "shared-id")
	_, destroyed, _ := f.snapshot()
	if len(destroyed) != 1 || f.liveCount() != 1 {
		t.Errorf("destroyed %v, %d live; want only beta's destroyed", destroyed, f.liveCount())
	}
	f.setRespond(script([]*sandboxv1.ExecuteResponse{out(sandboxv1.Stream_STREAM_STDOUT, "ok\n"), done(okRes())}, nil))
	if out := g.tool.Execute(t.Context(), "alpha", "shared-id", false, p, nil); out.Err != nil || len(out.Notices) != 0 {
		t.Errorf("alpha after beta's DELETE: %v, notices %v", out.Err, out.Notices)
	}
}
