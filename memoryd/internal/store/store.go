// Package store is memoryd's record store: opaque values with timestamps
// and revisions, per tenant and kind. Store is the narrow interface the
// handlers use; store/bolt implements it on one bbolt file, and
// store/postgres on a PostgreSQL database that any number of memoryd
// processes share. Both pass the same table of tests (eachStore in
// contract_test.go), and Copy moves records between them. This package
// holds what the two share: the interface, its errors, and the rules of
// request IDs and imports.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Domain errors. Callers test them with errors.Is; the messages they wrap
// are safe to show to clients.
var (
	// ErrNotFound means the key does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a compare-and-swap saw a different revision.
	ErrConflict = errors.New("conflict")
	// ErrInvalid means the input breaks a rule (bad key, bad JSON, ...).
	ErrInvalid = errors.New("invalid argument")
	// ErrTooLarge means a value exceeds the configured cap.
	ErrTooLarge = errors.New("too large")
	// ErrClosed means the store has been closed.
	ErrClosed = errors.New("store closed")
	// ErrUnavailable means the store cannot be reached for now (no
	// process serves a shared database); a later call may succeed.
	ErrUnavailable = errors.New("unavailable")
	// ErrLocked means another process holds the database file.
	ErrLocked = errors.New("locked")
)

// Kind separates the record families of a tenant. Keys of different kinds
// never meet.
type Kind string

// The kinds memoryd stores.
const (
	// KindMemory holds memory records: Value is JSON text, Meta is a JSON
	// object.
	KindMemory Kind = "memory"
	// KindTool holds saved tools: Value is Python source, Meta is the
	// docstring.
	KindTool Kind = "tools"
)

// MaxKeyBytes bounds memory keys: far past what a person writes as a
// name, and small enough that a key can still be indexed as it is (one
// PostgreSQL B-tree entry holds about 2,700 bytes).
const MaxKeyBytes = 2048

// MaxNameBytes bounds tenant names and tool names.
const MaxNameBytes = 256

// Record is one stored entry. Value and Meta are opaque to the store.
type Record struct {
	// Key is the record's key, exactly as written.
	Key string
	// Value is the payload. List leaves it nil unless asked for values.
	Value []byte
	// ValueLen is len(Value) as stored, set even when Value is omitted.
	ValueLen int
	// Meta is side data that UpdateMemory-style writes can keep.
	Meta []byte
	// Created is when the key was first written; overwrites keep it.
	Created time.Time
	// Updated is when the record was last written.
	Updated time.Time
	// Revision is 1 after the first write and grows by one per write.
	Revision uint64
}

// Write describes one Put.
type Write struct {
	// Value is the new payload.
	Value []byte
	// Meta is the new side data, ignored when KeepMeta is set and the key
	// exists.
	Meta []byte
	// KeepMeta keeps the existing record's Meta.
	KeepMeta bool
	// CheckRevision makes Put fail with ErrConflict unless the key's
	// current revision equals Revision (0 meaning "absent").
	CheckRevision bool
	// Revision is the expected revision when CheckRevision is set.
	Revision uint64
	// RequestID, when set, makes the write idempotent: a second Put with
	// the same ID does not write again but returns what the first one
	// did. A caller that lost the answer to a write (its connection to
	// the store broke) retries with the same ID; see NewRequestID.
	RequestID []byte
	// Created and Updated, when not zero, are written instead of the
	// clock's time, and Created replaces the existing record's. They are
	// for imports of records made elsewhere, which keep their own times;
	// every other write leaves them zero.
	Created, Updated time.Time
}

// Store is what the memoryd handlers need from storage. Every method is
// safe for concurrent use. Put and Delete return only after the change is
// durable.
type Store interface {
	// Get returns one record, or an error wrapping ErrNotFound.
	Get(ctx context.Context, tenant string, kind Kind, key string) (Record, error)
	// Put writes a record atomically: it keeps Created, sets Updated and
	// bumps Revision (unless w gives the times), and applies the revision
	// check of w.
	Put(ctx context.Context, tenant string, kind Kind, key string, w Write) (Record, error)
	// Delete removes a record and reports whether it existed. A
	// non-empty requestID makes it idempotent, as Write.RequestID does.
	Delete(ctx context.Context, tenant string, kind Kind, key string, requestID []byte) (bool, error)
	// List returns a tenant's records of one kind sorted by key, with
	// values only when withValues is set.
	List(ctx context.Context, tenant string, kind Kind, withValues bool) ([]Record, error)
	// Tenants returns every tenant that has records, sorted.
	Tenants(ctx context.Context) ([]string, error)
	// Backup writes a consistent copy of the whole store to w and returns
	// the number of bytes written.
	Backup(ctx context.Context, w io.Writer) (int64, error)
	// Close releases the store. Calls after Close fail with ErrClosed.
	Close() error
}

// Conflict describes a failed compare-and-swap: key is at revision have
// (0: absent), not want.
func Conflict(key string, have, want uint64) error {
	if have == 0 {
		return fmt.Errorf("%w: %q no longer exists (expected revision %d); reload and retry", ErrConflict, key, want)
	}
	return fmt.Errorf("%w: %q is at revision %d, not %d; reload and retry", ErrConflict, key, have, want)
}

// IsDomain reports whether err is one of the errors a write's own input
// causes, which neither a retry nor a commit on its own would change.
func IsDomain(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) ||
		errors.Is(err, ErrInvalid) || errors.Is(err, ErrTooLarge)
}

// MaxRevision is the largest revision a bigint column holds.
const MaxRevision = 1<<63 - 1
