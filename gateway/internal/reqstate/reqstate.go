// Package reqstate seals the requestState of the gateway's input_required
// results (MCP 2026-07-28, SEP-2322). The client carries the state back
// on its retry, so the gateway must not trust it: a state is signed with
// HMAC-SHA256 over the tool's prefix, the caller's tenant and the body,
// so that a state altered on the way, made up, or taken to another
// tenant is refused. Gateways that take each other's retries share the
// key (codeexec serve keeps it in the state dir).
package reqstate

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// MinKeyBytes is the shortest key Seal accepts.
const MinKeyBytes = 16

// ErrInvalid is a state this gateway did not seal for the tenant.
var ErrInvalid = errors.New("the requestState was not issued to this caller (it was altered, made up, issued by a gateway with another key, or to another tenant)")

// Sealer seals and opens states with one key.
type Sealer struct {
	key []byte
}

// New returns a Sealer with key; an empty key is a random one, which only
// this process knows.
func New(key []byte) (*Sealer, error) {
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("request state key: %w", err)
		}
	}
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("the request state key is %d bytes; it must be at least %d", len(key), MinKeyBytes)
	}
	return &Sealer{key: key}, nil
}

// Seal returns body as a state for tenant: prefix, body and its MAC, in
// base64url.
func (s *Sealer) Seal(prefix, tenant string, body []byte) string {
	enc := base64.RawURLEncoding
	return prefix + enc.EncodeToString(body) + "." + enc.EncodeToString(s.mac(prefix, tenant, body))
}

// Open returns the body of state, which Seal made with prefix for tenant,
// or ErrInvalid.
func (s *Sealer) Open(prefix, tenant, state string) ([]byte, error) {
	rest, ok := strings.CutPrefix(state, prefix)
	if !ok {
		return nil, ErrInvalid
	}
	b64, sig64, ok := strings.Cut(rest, ".")
	if !ok {
		return nil, ErrInvalid
	}
	body, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil {
		return nil, ErrInvalid
	}
	sig, err := base64.RawURLEncoding.DecodeString(sig64)
	if err != nil || !hmac.Equal(sig, s.mac(prefix, tenant, body)) {
		return nil, ErrInvalid
	}
	return body, nil
}

// mac covers each part with its length, so that no two (prefix, tenant,
// body) give the same input.
func (s *Sealer) mac(prefix, tenant string, body []byte) []byte {
	h := hmac.New(sha256.New, s.key)
	for _, part := range [][]byte{[]byte(prefix), []byte(tenant), body} {
		_, _ = fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return h.Sum(nil)
}
