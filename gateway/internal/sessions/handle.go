package sessions

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// HandleFor is the sandbox session handle of a tenant's MCP session over
// HTTP: the first 128 bits of a SHA-256 of both, in the form of a random
// handle. Every gateway, this one after a restart or another behind the
// same balancer, computes the same handle, so the MCP session finds its
// sandbox session (and, through the store, its checkpoint) again, and no
// gateway keeps routing of its own. The tenant is part of it, so another
// tenant presenting the same MCP session ID reaches a handle of its own.
//
// No key is needed: the MCP session ID is the secret, 122 random bits
// when the gateway issued it, and a hash of it is as hard to guess. A key
// would be one more secret to keep the same on every gateway, and losing
// it would lose every session.
func HandleFor(tenant, mcpID string) string {
	h := sha256.New()
	// The tenant's length goes first, so that no other pair of tenant
	// and ID hashes the same bytes.
	h.Write([]byte("codeexec mcp session\x00"))
	h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(tenant))))
	h.Write([]byte(tenant))
	h.Write([]byte(mcpID))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// overHTTPKey marks a request that came in over streamable HTTP.
type overHTTPKey struct{}

// OverHTTP marks ctx as that of a request on the HTTP transport, whose MCP
// sessions map to handles from HandleFor.
func OverHTTP(ctx context.Context) context.Context {
	return context.WithValue(ctx, overHTTPKey{}, true)
}

// IsOverHTTP reports whether OverHTTP marked ctx.
func IsOverHTTP(ctx context.Context) bool {
	v, _ := ctx.Value(overHTTPKey{}).(bool)
	return v
}
