// Package auth decides who an HTTP request comes from: static bearer tokens
// from a file (stored hashed) and JWTs from an OAuth issuer, each mapped to
// a tenant.
package auth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// ErrUnauthorized means the credentials are missing, unknown, expired or
// otherwise not accepted. Its message never says which, nor anything about
// other tenants.
var ErrUnauthorized = errors.New("unauthorized")

// Authenticator maps a bearer token to its tenant.
type Authenticator interface {
	// Authenticate returns the token's tenant, or an error wrapping
	// ErrUnauthorized.
	Authenticate(ctx context.Context, token string) (tenant string, err error)
}

// hashPrefix starts every hashed token in a tokens file.
const hashPrefix = "sha256:"

// Hash returns the form a token is stored in: "sha256:<hex>".
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hashPrefix + hex.EncodeToString(sum[:])
}

// reloadCheck is how often at most the tokens file's modification time is
// looked at; a changed file is read again on the next request after that.
const reloadCheck = time.Second

// TokenFile authenticates static tokens listed in a file, one per line:
//
//	sha256:<64 hex digits> <tenant>
//
// Blank lines and lines starting with # are ignored. Plain-text tokens are
// refused: the file holds only hashes, so reading it grants nothing. The
// file is read again when its modification time or size changes.
type TokenFile struct {
	path string
	now  func() time.Time

	mu        sync.Mutex
	checked   time.Time
	modTime   time.Time
	size      int64
	entries   []tokenEntry
	lastError error
}

type tokenEntry struct {
	hash   [sha256.Size]byte
	tenant string
}

// NewTokenFile reads path and returns a TokenFile that follows its changes.
// A file that cannot be read or parsed is an error here; later, a broken
// edit keeps the previous tokens (and the error is reported by Err).
func NewTokenFile(path string) (*TokenFile, error) {
	f := &TokenFile{path: path, now: time.Now}
	if err := f.reload(); err != nil {
		return nil, err
	}
	f.checked = f.now()
	return f, nil
}

// Err reports the last reload error, or nil if the last read succeeded.
func (f *TokenFile) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastError
}

// Authenticate implements Authenticator. Every entry is compared in
// constant time, so timing does not reveal how close a guess came.
func (f *TokenFile) Authenticate(_ context.Context, token string) (string, error) {
	if token == "" {
		return "", fmt.Errorf("%w: no token", ErrUnauthorized)
	}
	f.maybeReload()
	sum := sha256.Sum256([]byte(token))
	f.mu.Lock()
	entries := f.entries
	f.mu.Unlock()
	tenant := ""
	for _, e := range entries {
		if subtle.ConstantTimeCompare(sum[:], e.hash[:]) == 1 {
			tenant = e.tenant
		}
	}
	if tenant == "" {
		return "", fmt.Errorf("%w: unknown token", ErrUnauthorized)
	}
	return tenant, nil
}

func (f *TokenFile) maybeReload() {
	f.mu.Lock()
	now := f.now()
	if now.Sub(f.checked) < reloadCheck {
		f.mu.Unlock()
		return
	}
	f.checked = now
	f.mu.Unlock()
	st, err := os.Stat(f.path)
	f.mu.Lock()
	changed := err != nil || !st.ModTime().Equal(f.modTime) || st.Size() != f.size
	f.mu.Unlock()
	if changed {
		_ = f.reload()
	}
}

// reload reads the file; on error the previous entries stay.
func (f *TokenFile) reload() error {
	st, err := os.Stat(f.path)
	var data []byte
	if err == nil {
		data, err = os.ReadFile(f.path)
	}
	var entries []tokenEntry
	if err == nil {
		entries, err = parseTokens(data)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.lastError = fmt.Errorf("tokens file %s: %w", f.path, err)
		return f.lastError
	}
	f.entries, f.modTime, f.size, f.lastError = entries, st.ModTime(), st.Size(), nil
	return nil
}

// parseTokens parses a tokens file's content.
func parseTokens(data []byte) ([]tokenEntry, error) {
	var out []tokenEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want \"sha256:<hex> TENANT\", got %d fields", n, len(fields))
		}
		hexSum, ok := strings.CutPrefix(fields[0], hashPrefix)
		if !ok {
			return nil, fmt.Errorf("line %d: the token must be stored hashed as sha256:<hex>; make it with `codeexec token hash`", n)
		}
		raw, err := hex.DecodeString(hexSum)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("line %d: sha256 hash must be 64 hex digits", n)
		}
		if err := ValidTenant(fields[1]); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		var e tokenEntry
		copy(e.hash[:], raw)
		e.tenant = fields[1]
		out = append(out, e)
	}
	return out, sc.Err()
}

// ValidTenant checks a tenant name: 1–64 characters of letters, digits,
// '.', '_', '-' and '@'.
func ValidTenant(t string) error {
	if t == "" || len(t) > 64 {
		return fmt.Errorf("tenant %q: want 1 to 64 characters", t)
	}
	for _, r := range t {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@|:", r)
		if !ok {
			return fmt.Errorf("tenant %q: only letters, digits and . _ - @ | : are allowed", t)
		}
	}
	return nil
}

// Chain tries each Authenticator in turn and returns the first tenant.
type Chain []Authenticator

// Authenticate implements Authenticator.
func (c Chain) Authenticate(ctx context.Context, token string) (string, error) {
	errs := []error{ErrUnauthorized}
	for _, a := range c {
		t, err := a.Authenticate(ctx, token)
		if err == nil {
			return t, nil
		}
		errs = append(errs, err)
	}
	return "", errors.Join(errs...)
}
