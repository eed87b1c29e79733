package guard

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/codeexec/codeexec/gateway/internal/auth"
)

// Config configures who may use the HTTP transport. Static tokens and
// JWTs can be used together; a token is accepted if either accepts it.
type Config struct {
	// TokensFile lists accepted static tokens, hashed, each with its
	// tenant ("sha256:<hex> TENANT" per line; see auth.Hash). It is read
	// again when it changes.
	TokensFile string
	// JWTIssuer, JWKSURL and JWTAudience enable JWTs from an OAuth
	// authorization server: signed by a key in its JWKS, issued by it, for
	// this audience, and not expired.
	JWTIssuer   string
	JWKSURL     string
	JWTAudience string
	// TenantClaim names the JWT claim that is the tenant (default "sub").
	TenantClaim string
	// ResourceURL is this server's MCP endpoint as clients reach it, e.g.
	// https://mcp.example.com/mcp: the "resource" of the protected-resource
	// metadata. Empty derives it from each request's Host.
	ResourceURL string
	// Disabled serves without authentication: every caller is the
	// gateway's configured tenant.
	Disabled bool
	// AllowedHosts are Host header values accepted besides loopback names
	// and ResourceURL's host: "name" (any port), "name:port" or "*" (any).
	// Without authentication only these are accepted, which defeats DNS
	// rebinding; with authentication an empty list accepts any host, since
	// a rebinding page has no token.
	AllowedHosts []string
	// AllowedOrigins are browser origins (scheme://host[:port]) accepted
	// besides loopback ones and ResourceURL's ("*" accepts any). A request
	// with any other Origin header is refused with 403.
	AllowedOrigins []string
	// MetricsTenants may read /metrics from other hosts with their token;
	// loopback peers always may (see Guard.Metrics).
	MetricsTenants []string
}

// Enabled reports whether some authentication method is configured.
func (c Config) Enabled() bool { return !c.Disabled && (c.TokensFile != "" || c.JWTIssuer != "") }

// Validate reports contradictions and missing pieces.
func (c Config) Validate() error {
	var errs []error
	if c.Disabled && (c.TokensFile != "" || c.JWTIssuer != "") {
		errs = append(errs, errors.New("authentication is both configured and disabled (--insecure-no-auth); choose one"))
	}
	if c.JWTIssuer != "" || c.JWKSURL != "" || c.JWTAudience != "" {
		if err := c.jwt().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("JWT authentication needs an issuer, a JWKS URL and an audience: %w", err))
		}
	}
	if c.ResourceURL != "" {
		if u, err := url.Parse(c.ResourceURL); err != nil || !u.IsAbs() || u.Host == "" {
			errs = append(errs, fmt.Errorf("resource URL %q: want an absolute URL such as https://mcp.example.com/mcp", c.ResourceURL))
		}
	}
	return errors.Join(errs...)
}

func (c Config) jwt() auth.JWTConfig {
	return auth.JWTConfig{Issuer: c.JWTIssuer, JWKSURL: c.JWKSURL, Audience: c.JWTAudience, TenantClaim: c.TenantClaim}
}

// authenticator builds the configured authenticator, or nil when
// authentication is off.
func (c Config) authenticator() (auth.Authenticator, error) {
	if !c.Enabled() {
		return nil, nil
	}
	var chain auth.Chain
	if c.TokensFile != "" {
		f, err := auth.NewTokenFile(c.TokensFile)
		if err != nil {
			return nil, err
		}
		chain = append(chain, f)
	}
	if c.JWTIssuer != "" {
		j, err := auth.NewJWT(c.jwt(), nil)
		if err != nil {
			return nil, err
		}
		chain = append(chain, j)
	}
	return chain, nil
}
