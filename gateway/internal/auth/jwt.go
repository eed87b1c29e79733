package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DefaultTenantClaim is the claim that names the tenant when none is set.
const DefaultTenantClaim = "sub"

// JWTConfig configures JWT validation.
type JWTConfig struct {
	// Issuer is the expected "iss" and the issuer advertised in the
	// protected-resource metadata.
	Issuer string
	// JWKSURL is where the issuer publishes its signing keys.
	JWKSURL string
	// Audience is the expected "aud": this gateway's resource identifier.
	Audience string
	// TenantClaim names the string claim whose value is the tenant
	// (default "sub").
	TenantClaim string
	// Leeway tolerates clock skew on exp, nbf and iat.
	Leeway time.Duration
}

// Validate reports what is missing.
func (c JWTConfig) Validate() error {
	var errs []error
	if c.Issuer == "" {
		errs = append(errs, errors.New("JWT issuer is empty"))
	}
	if c.JWKSURL == "" {
		errs = append(errs, errors.New("JWKS URL is empty"))
	}
	if c.Audience == "" {
		errs = append(errs, errors.New("JWT audience is empty: set it to this server's resource URL"))
	}
	return errors.Join(errs...)
}

// JWT validates signed JWTs against the issuer's JWKS.
type JWT struct {
	cfg    JWTConfig
	keys   *keySet
	parser *jwt.Parser
}

// NewJWT returns a JWT validator. Keys are fetched on first use and cached;
// client may be nil for http.DefaultClient.
func NewJWT(cfg JWTConfig, client *http.Client) (*JWT, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.TenantClaim == "" {
		cfg.TenantClaim = DefaultTenantClaim
	}
	if client == nil {
		client = http.DefaultClient
	}
	return &JWT{
		cfg:  cfg,
		keys: &keySet{url: cfg.JWKSURL, client: client, now: time.Now},
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}),
			jwt.WithIssuer(cfg.Issuer),
			jwt.WithAudience(cfg.Audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(cfg.Leeway),
		),
	}, nil
}

// Authenticate implements Authenticator.
func (v *JWT) Authenticate(ctx context.Context, token string) (string, error) {
	claims := jwt.MapClaims{}
	_, err := v.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return v.keys.key(ctx, kid)
	})
	if err != nil {
		return "", fmt.Errorf("%w: JWT: %w", ErrUnauthorized, err)
	}
	tenant, _ := claims[v.cfg.TenantClaim].(string)
	if err := ValidTenant(tenant); err != nil {
		return "", fmt.Errorf("%w: JWT claim %q: %w", ErrUnauthorized, v.cfg.TenantClaim, err)
	}
	return tenant, nil
}
