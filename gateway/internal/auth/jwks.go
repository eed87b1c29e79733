package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sync"
	"time"
)

// JWKS timing: keys are fetched again after jwksMaxAge, and a token naming
// an unknown key ID makes a fetch at most once per jwksMinRefresh, so that
// forged key IDs cannot make the gateway hammer the issuer.
const (
	jwksMaxAge     = 10 * time.Minute
	jwksMinRefresh = 30 * time.Second
	jwksFetchLimit = 1 << 20
)

// errNoKey means the JWKS has no usable key for a token's key ID.
var errNoKey = errors.New("no matching key in the issuer's JWKS")

// keySet fetches and caches an issuer's JSON Web Key Set.
type keySet struct {
	url    string
	client *http.Client
	now    func() time.Time

	mu      sync.Mutex
	keys    map[string]crypto.PublicKey
	fetched time.Time
	tried   time.Time
}

// key returns the public key with the given ID ("" matches a set of one).
func (s *keySet) key(ctx context.Context, kid string) (crypto.PublicKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	stale := s.keys == nil || now.Sub(s.fetched) > jwksMaxAge
	k, found := s.lookup(kid)
	if (stale || !found) && now.Sub(s.tried) >= jwksMinRefresh {
		s.tried = now
		keys, err := s.fetch(ctx)
		if err != nil && s.keys == nil {
			return nil, err
		}
		if err == nil {
			s.keys, s.fetched = keys, now
		}
		k, found = s.lookup(kid)
	}
	if !found {
		return nil, errNoKey
	}
	return k, nil
}

func (s *keySet) lookup(kid string) (crypto.PublicKey, bool) {
	if kid == "" && len(s.keys) == 1 {
		for _, k := range s.keys {
			return k, true
		}
	}
	k, ok := s.keys[kid]
	return k, ok
}

// jwk is the subset of RFC 7517 fields the gateway reads.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

func (s *keySet) fetch(ctx context.Context) (map[string]crypto.PublicKey, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS %s: %w", s.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch JWKS %s: HTTP %d", s.url, resp.StatusCode)
	}
	var doc struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, jwksFetchLimit)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", s.url, err)
	}
	keys := map[string]crypto.PublicKey{}
	for _, k := range doc.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		pub, err := k.publicKey()
		if err != nil {
			continue // keys of kinds the gateway does not use are skipped
		}
		keys[k.Kid] = pub
	}
	return keys, nil
}

func b64(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }

func (k jwk) publicKey() (crypto.PublicKey, error) {
	switch k.Kty {
	case "RSA":
		n, err1 := b64(k.N)
		e, err2 := b64(k.E)
		if err := errors.Join(err1, err2); err != nil || len(e) > 4 || len(n) < 256 {
			return nil, errors.New("bad RSA key")
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}, nil
	case "EC":
		var curve elliptic.Curve
		switch k.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return nil, errors.New("unsupported curve")
		}
		x, err1 := b64(k.X)
		y, err2 := b64(k.Y)
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		size := (curve.Params().BitSize + 7) / 8
		if len(x) != size || len(y) != size {
			return nil, errors.New("bad EC point size")
		}
		// Build the uncompressed point so that the standard library checks
		// it is on the curve.
		point := append(append([]byte{4}, x...), y...)
		return ecdsa.ParseUncompressedPublicKey(curve, point)
	case "OKP":
		x, err := b64(k.X)
		if k.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize {
			return nil, errors.New("bad OKP key")
		}
		return ed25519.PublicKey(x), nil
	}
	return nil, fmt.Errorf("unsupported key type %q", k.Kty)
}
