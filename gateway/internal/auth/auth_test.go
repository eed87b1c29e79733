package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func writeTokens(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTokenFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, path, "# team tokens", "", Hash("alpha-secret")+" alpha", Hash("beta-secret")+"   beta")
	f, err := NewTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token, want string
	}{
		{"alpha-secret", "alpha"},
		{"beta-secret", "beta"},
		{"alpha-secre", ""},
		{"", ""},
		{Hash("alpha-secret"), ""}, // the stored hash is not itself a token
	} {
		got, err := f.Authenticate(t.Context(), tc.token)
		if got != tc.want || (tc.want == "") != errors.Is(err, ErrUnauthorized) {
			t.Errorf("Authenticate(%q) = %q, %v; want %q", tc.token, got, err, tc.want)
		}
	}

	// An edit is picked up once the reload check interval has passed.
	clock := time.Now()
	f.now = func() time.Time { return clock }
	writeTokens(t, path, Hash("gamma-secret")+" gamma")
	clock = clock.Add(2 * reloadCheck)
	if got, err := f.Authenticate(t.Context(), "gamma-secret"); got != "gamma" {
		t.Errorf("after the edit, gamma-secret = %q, %v; want gamma", got, err)
	}
	if _, err := f.Authenticate(t.Context(), "alpha-secret"); err == nil {
		t.Error("after the edit removed it, alpha-secret is still accepted")
	}
	// A broken edit keeps the previous tokens and reports why.
	writeTokens(t, path, "plain-token gamma", "and more")
	clock = clock.Add(2 * reloadCheck)
	if got, _ := f.Authenticate(t.Context(), "gamma-secret"); got != "gamma" || f.Err() == nil {
		t.Errorf("after a broken edit: gamma-secret = %q, Err = %v; want gamma and an error", got, f.Err())
	}
}

func TestParseTokensErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, line, want string }{
		{"plain text", "secret alpha", "stored hashed"},
		{"short hash", "sha256:abcd alpha", "64 hex digits"},
		{"no tenant", Hash("x"), "got 1 fields"},
		{"bad tenant", Hash("x") + " a/b", "only letters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseTokens([]byte(tc.line))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parseTokens(%q) = %v; want an error containing %q", tc.line, err, tc.want)
			}
		})
	}
}

// issuer is a test OAuth issuer with a JWKS endpoint.
type issuer struct {
	srv     *httptest.Server
	rsaKey  *rsa.PrivateKey
	ecKey   *ecdsa.PrivateKey
	fetches atomic.Int32
}

func newIssuer(t testing.TB) *issuer {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{rsaKey: rk, ecKey: ek}
	enc := base64.RawURLEncoding.EncodeToString
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		is.fetches.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{
			{"kty": "RSA", "kid": "r1", "use": "sig", "n": enc(rk.N.Bytes()), "e": enc(big.NewInt(int64(rk.E)).Bytes())},
			{"kty": "EC", "kid": "e1", "crv": "P-256", "x": enc(ek.X.FillBytes(make([]byte, 32))), "y": enc(ek.Y.FillBytes(make([]byte, 32)))},
		}})
	}))
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) sign(t testing.TB, method jwt.SigningMethod, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	tok.Header["kid"] = kid
	var key any = is.rsaKey
	if strings.HasPrefix(method.Alg(), "ES") {
		key = is.ecKey
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJWT(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	v, err := NewJWT(JWTConfig{Issuer: "https://issuer.test", JWKSURL: is.srv.URL, Audience: "http://127.0.0.1/mcp", TenantClaim: "org"}, is.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	good := func(extra jwt.MapClaims) jwt.MapClaims {
		c := jwt.MapClaims{"iss": "https://issuer.test", "aud": "http://127.0.0.1/mcp", "sub": "user-1", "org": "acme",
			"exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
		for k, val := range extra {
			c[k] = val
		}
		return c
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	forged := jwt.NewWithClaims(jwt.SigningMethodRS256, good(nil))
	forged.Header["kid"] = "r1"
	forgedToken, _ := forged.SignedString(other)

	for _, tc := range []struct {
		name, token, want string
	}{
		{"RS256", is.sign(t, jwt.SigningMethodRS256, "r1", good(nil)), "acme"},
		{"ES256", is.sign(t, jwt.SigningMethodES256, "e1", good(nil)), "acme"},
		{"expired", is.sign(t, jwt.SigningMethodRS256, "r1", good(jwt.MapClaims{"exp": now.Add(-time.Minute).Unix()})), ""},
		{"no expiry", is.sign(t, jwt.SigningMethodRS256, "r1", good(jwt.MapClaims{"exp": nil})), ""},
		{"wrong audience", is.sign(t, jwt.SigningMethodRS256, "r1", good(jwt.MapClaims{"aud": "https://elsewhere/mcp"})), ""},
		{"wrong issuer", is.sign(t, jwt.SigningMethodRS256, "r1", good(jwt.MapClaims{"iss": "https://evil.test"})), ""},
		{"no tenant claim", is.sign(t, jwt.SigningMethodRS256, "r1", good(jwt.MapClaims{"org": nil})), ""},
		{"unknown key", is.sign(t, jwt.SigningMethodRS256, "r9", good(nil)), ""},
		{"forged signature", forgedToken, ""},
		{"HS256 with the public key", hsToken(t, good(nil)), ""},
		{"garbage", "not.a.jwt", ""},
	} {
		got, err := v.Authenticate(t.Context(), tc.token)
		if got != tc.want || (tc.want == "") != errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s: Authenticate = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	// Keys are cached: one fetch, plus at most one for the unknown key ID.
	if n := is.fetches.Load(); n > 2 {
		t.Errorf("the JWKS was fetched %d times; want the keys cached", n)
	}
}

func hsToken(t *testing.T, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, c)
	tok.Header["kid"] = "r1"
	s, err := tok.SignedString([]byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestChain(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, path, Hash("s")+" static")
	f, err := NewTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	is := newIssuer(t)
	v, err := NewJWT(JWTConfig{Issuer: "i", JWKSURL: is.srv.URL, Audience: "a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := Chain{f, v}
	jwtTok := is.sign(t, jwt.SigningMethodRS256, "r1", jwt.MapClaims{"iss": "i", "aud": "a", "sub": "u1", "exp": time.Now().Add(time.Hour).Unix()})
	for token, want := range map[string]string{"s": "static", jwtTok: "u1", "nope": ""} {
		got, err := c.Authenticate(t.Context(), token)
		if got != want || (want == "") != errors.Is(err, ErrUnauthorized) {
			t.Errorf("Chain.Authenticate(%.10q…) = %q, %v; want %q", token, got, err, want)
		}
	}
}
