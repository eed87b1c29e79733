package store

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"time"
)

// Idempotent writes. A process that reaches the database through another
// process (internal/shared) can lose the answer to a write that committed:
// the owner dies between its fsync and its reply. It then retries the
// write on the next owner, with the same request ID. The outcome of every
// write that carries an ID is kept for RequestRetention, in the same
// transaction as the write (bbolt: bucket "requests"; PostgreSQL: table
// codeexec_requests), so the retry finds it and answers as the first
// attempt did instead of writing twice.

// RequestIDBytes is the length of a request ID.
const RequestIDBytes = 16

// RequestRetention is how long outcomes are kept. A retry comes within the
// caller's wait for a new owner (seconds); an hour leaves a wide margin.
const RequestRetention = time.Hour

// SweepEvery spaces the sweeps of expired outcomes; each removes at most
// SweepBatch, so one write never pays for a long backlog.
const (
	SweepEvery = time.Minute
	SweepBatch = 4096
)

// Outcome.Op's values.
const (
	OutcomePut    = 1
	OutcomeDelete = 2
)

// NewRequestID returns a fresh request ID: 8 bytes of Unix nanoseconds,
// big-endian, so that IDs sort by age and expire in key order, then 8
// random bytes.
func NewRequestID(now time.Time) []byte {
	id := make([]byte, RequestIDBytes)
	binary.BigEndian.PutUint64(id, uint64(now.UnixNano()))
	_, _ = rand.Read(id[8:])
	return id
}

// CheckRequestID refuses IDs of the wrong length, which a buggy or foreign
// client could send.
func CheckRequestID(id []byte) error {
	if len(id) != 0 && len(id) != RequestIDBytes {
		return fmt.Errorf("%w: request ID has %d bytes, want %d", ErrInvalid, len(id), RequestIDBytes)
	}
	return nil
}

// Outcome is what a write with a request ID did.
type Outcome struct {
	// Op is OutcomePut or OutcomeDelete.
	Op byte
	// Tenant, Kind and Key name the record written.
	Tenant string
	Kind   Kind
	Key    string
	// Deleted is what a delete reported.
	Deleted bool
	// Record is what a put wrote, without value and meta.
	Record Record
}
