package auth

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzParseTokens parses arbitrary tokens files: it must not panic, and
// whatever it accepts must name valid tenants; a file it accepts parses
// the same way again after a round trip through its own format.
func FuzzParseTokens(f *testing.F) {
	f.Add([]byte(Hash("secret") + " acme\n# comment\n\n" + Hash("other") + " team-2@x\n"))
	f.Add([]byte("sha256:zz acme\n"))
	f.Add([]byte("plain-token acme\n"))
	f.Add([]byte(Hash("a") + " bad tenant!\n"))
	f.Add([]byte(Hash("a") + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parseTokens(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") && !strings.Contains(err.Error(), "token too long") {
				t.Errorf("error %q does not say which line", err)
			}
			return
		}
		var again strings.Builder
		for _, e := range entries {
			if err := ValidTenant(e.tenant); err != nil {
				t.Errorf("accepted an invalid tenant: %v", err)
			}
			again.WriteString(hashPrefix + hex.EncodeToString(e.hash[:]) + " " + e.tenant + "\n")
		}
		back, err := parseTokens([]byte(again.String()))
		if err != nil || len(back) != len(entries) {
			t.Fatalf("round trip: %v, %d entries, want %d", err, len(back), len(entries))
		}
		for i := range back {
			if back[i] != entries[i] {
				t.Errorf("round trip changed entry %d", i)
			}
		}
	})
}

// FuzzJWT hands the validator arbitrary tokens, starting from well-formed
// ones signed by the issuer's keys and from forgeries. It must not panic,
// and it may accept only tokens the issuer really signed: since the fuzzer
// cannot forge a signature, any accepted token names the one tenant the
// seeds carry.
func FuzzJWT(f *testing.F) {
	is := newIssuer(f)
	v, err := NewJWT(JWTConfig{Issuer: "https://issuer.test", JWKSURL: is.srv.URL, Audience: "aud", TenantClaim: "org"}, is.srv.Client())
	if err != nil {
		f.Fatal(err)
	}
	now := time.Now()
	claims := jwt.MapClaims{"iss": "https://issuer.test", "aud": "aud", "org": "acme", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	f.Add(is.sign(f, jwt.SigningMethodRS256, "r1", claims))
	f.Add(is.sign(f, jwt.SigningMethodES256, "e1", claims))
	f.Add("eyJhbGciOiJub25lIn0.eyJvcmciOiJldmlsIn0.")
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		tenant, err := v.Authenticate(t.Context(), token)
		if err == nil && tenant != "acme" {
			t.Errorf("accepted a token for tenant %q that the issuer never signed", tenant)
		}
		if err != nil && tenant != "" {
			t.Errorf("a rejected token still named tenant %q", tenant)
		}
	})
}
