package auth

import "context"

type tenantKey struct{}

// WithTenant returns ctx carrying the tenant that the caller's credentials
// name.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// Tenant returns the tenant WithTenant put in ctx, or fallback when there
// is none: the configured tenant of unauthenticated transports (stdio).
func Tenant(ctx context.Context, fallback string) string {
	if t, ok := ctx.Value(tenantKey{}).(string); ok && t != "" {
		return t
	}
	return fallback
}
