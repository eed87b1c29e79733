package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"

	"github.com/golang-jwt/jwt/v5"
	"github.com/mark3labs/mcp-go/client"
)

// tokenClient is an initialised HTTP MCP client sending a bearer token.
func tokenClient(t *testing.T, base, token string) *client.Client {
	t.Helper()
	return harness.HTTPClientWith(t, base, map[string]string{"Authorization": "Bearer " + token})
}

// rawInitialize posts an initialize request with the given headers.
// reply is an HTTP response whose body was read and closed.
type reply struct {
	StatusCode int
	Header     http.Header
}

func rawInitialize(t *testing.T, base string, header map[string]string) (reply, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`
	return rawRequest(t, http.MethodPost, base+"/mcp", body, header)
}

// rawRequest makes a request to the MCP endpoint with the given headers, as
// a client of streamable HTTP does. The body of an event stream is not
// read, as it does not end.
func rawRequest(t *testing.T, method, url, body string, header map[string]string) (reply, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		return reply{StatusCode: resp.StatusCode, Header: resp.Header}, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return reply{StatusCode: resp.StatusCode, Header: resp.Header}, string(b)
}

// jwksIssuer is an OAuth issuer for the tests: an RSA key served as a JWKS.
type jwksIssuer struct {
	url string
	key *rsa.PrivateKey
}

func newJWKSIssuer(t *testing.T) jwksIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
			"n": enc(key.N.Bytes()), "e": enc(big.NewInt(int64(key.E)).Bytes()),
		}}})
	}))
	t.Cleanup(srv.Close)
	return jwksIssuer{url: srv.URL, key: key}
}

// token is a JWT for carol.
func (is jwksIssuer) token(t *testing.T, aud string, exp time.Time) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"iss": is.url, "aud": aud, "sub": "carol", "exp": exp.Unix(), "iat": time.Now().Add(-2 * time.Hour).Unix(),
	})
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(is.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestE2EAuthRejectsMissingWrongAndExpiredTokens(t *testing.T) {
	t.Parallel()
	is := newJWKSIssuer(t)
	addr := harness.FreeAddr(t)
	base := "http://" + addr
	harness.StartProcess(t, harness.BaseEnv(t, map[string]string{"CODEEXEC_TOKENS_FILE": harness.TokensFile(t, map[string]string{"alpha-token": "alpha"})}),
		"serve", "--http", addr, "--jwt-issuer", is.url, "--jwks-url", is.url, "--jwt-audience", base+"/mcp")
	harness.WaitHTTP(t, base+"/healthz")

	metadata := base + "/.well-known/oauth-protected-resource/mcp"
	for _, tc := range []struct {
		name  string
		token string
		want  int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "beta-token", http.StatusUnauthorized},
		{"expired JWT", is.token(t, base+"/mcp", time.Now().Add(-time.Minute)), http.StatusUnauthorized},
		{"JWT for another audience", is.token(t, "https://elsewhere/mcp", time.Now().Add(time.Hour)), http.StatusUnauthorized},
		{"static token", "alpha-token", http.StatusOK},
		{"valid JWT", is.token(t, base+"/mcp", time.Now().Add(time.Hour)), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.token != "" {
				h["Authorization"] = "Bearer " + tc.token
			}
			resp, body := rawInitialize(t, base, h)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.want, body)
			}
			if tc.want == http.StatusUnauthorized {
				if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer ") || !strings.Contains(got, `resource_metadata="`+metadata+`"`) {
					t.Errorf("WWW-Authenticate = %q; want Bearer with resource_metadata %s", got, metadata)
				}
				if strings.Contains(body, "alpha") || strings.Contains(body, "carol") {
					t.Errorf("the 401 names a tenant: %s", body)
				}
			}
		})
	}
	// The metadata names the issuer, and a JWT's subject is its tenant.
	resp, err := http.Get(metadata)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if doc["resource"] != base+"/mcp" || fmt.Sprint(doc["authorization_servers"]) != "["+is.url+"]" {
		t.Errorf("protected-resource metadata = %v", doc)
	}
	c := tokenClient(t, base, is.token(t, base+"/mcp", time.Now().Add(time.Hour)))
	if got := harness.Joined(harness.Code(t, c, "print(6 * 7)").Stdout()); got != "42" {
		t.Errorf("a call with a valid JWT printed %q", got)
	}
}

func TestE2EAuthAddressRules(t *testing.T) {
	t.Parallel()
	// A public address without authentication is refused, and says why.
	cmd := exec.Command(harness.Binary, "serve", "--http", "0.0.0.0:0")
	cmd.Env = harness.BaseEnv(t, nil)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refusing to serve MCP over HTTP on 0.0.0.0:0 without authentication") ||
		!strings.Contains(string(out), "--insecure-no-auth") {
		t.Fatalf("serve --http 0.0.0.0:0 without auth: %v\n%s", err, out)
	}
	// A bare port binds loopback only.
	port := strings.TrimPrefix(harness.FreeAddr(t), "127.0.0.1")
	logs := harness.StartProcess(t, harness.BaseEnv(t, nil), "serve", "--http", port)
	harness.WaitHTTP(t, "http://127.0.0.1"+port+"/healthz")
	if !logs.Await("http://127.0.0.1"+port+"/mcp", 10*time.Second) {
		t.Errorf("--http %s did not bind 127.0.0.1:\n%s", port, logs.String())
	}
	// With no authentication, a rebound Host or a foreign Origin is refused.
	for _, h := range []map[string]string{{"Origin": "http://evil.example"}} {
		if resp, body := rawInitialize(t, "http://127.0.0.1"+port, h); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%v: status %d, want 403: %s", h, resp.StatusCode, body)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1"+port+"/mcp", strings.NewReader("{}"))
	req.Host = "evil.example" + port
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("rebound Host: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("rebound Host: status %d, want 403", resp.StatusCode)
	}
}

func TestE2EAuthTokensFileReloads(t *testing.T) {
	t.Parallel()
	path := harness.TokensFile(t, map[string]string{"alpha-token": "alpha"})
	base := harness.StartAuthHTTP(t, map[string]string{"CODEEXEC_TOKENS_FILE": path})
	status := func(token string) int {
		resp, _ := rawInitialize(t, base, map[string]string{"Authorization": "Bearer " + token})
		return resp.StatusCode
	}
	if status("alpha-token") != http.StatusOK || status("gamma-token") != http.StatusUnauthorized {
		t.Fatal("before the edit: want alpha accepted and gamma refused")
	}
	// Replace the file, as an operator rotating tokens would.
	fresh := harness.TokensFile(t, map[string]string{"gamma-token": "gamma"})
	if err := os.Rename(fresh, path); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); status("gamma-token") != http.StatusOK; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the new token is still refused after the tokens file changed")
		}
	}
	if got := status("alpha-token"); got != http.StatusUnauthorized {
		t.Errorf("the removed token gets %d, want 401", got)
	}
}
