package store

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Idempotent writes. A process that reaches the database through another
// process (internal/shared) can lose the answer to a write that committed:
// the owner dies between its fsync and its reply. It then retries the
// write on the next owner, with the same request ID. The outcome of every
// write that carries an ID is kept in bucket "requests" for
// requestRetention, in the same transaction as the write, so the retry
// finds it and answers as the first attempt did instead of writing twice.

// RequestIDBytes is the length of a request ID.
const RequestIDBytes = 16

// requestRetention is how long outcomes are kept. A retry comes within the
// caller's wait for a new owner (seconds); an hour leaves a wide margin.
const requestRetention = time.Hour

// sweepEvery spaces the sweeps of expired outcomes; each removes at most
// sweepBatch, so one write never pays for a long backlog.
const (
	sweepEvery = time.Minute
	sweepBatch = 4096
)

var bucketRequests = []byte("requests")

// Outcome kinds in bucket "requests".
const (
	outcomePut    = 1
	outcomeDelete = 2
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

// checkRequestID refuses IDs of the wrong length, which a buggy or foreign
// client could send.
func checkRequestID(id []byte) error {
	if len(id) != 0 && len(id) != RequestIDBytes {
		return fmt.Errorf("%w: request ID has %d bytes, want %d", ErrInvalid, len(id), RequestIDBytes)
	}
	return nil
}

// outcome is what a write with a request ID did.
type outcome struct {
	kind    byte
	tenant  string
	recKind Kind
	key     string
	deleted bool   // outcomeDelete
	rec     Record // outcomePut, without value and meta
}

func encodeOutcome(o outcome) []byte {
	buf := []byte{o.kind}
	for _, s := range []string{o.tenant, string(o.recKind), o.key} {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	if o.kind == outcomeDelete {
		if o.deleted {
			return append(buf, 1)
		}
		return append(buf, 0)
	}
	r := o.rec
	r.Value, r.Meta = nil, nil
	return append(buf, encode(r)...)
}

func decodeOutcome(b []byte) (outcome, error) {
	if len(b) == 0 || (b[0] != outcomePut && b[0] != outcomeDelete) {
		return outcome{}, fmt.Errorf("%w request outcome: kind", errCorrupt)
	}
	o := outcome{kind: b[0]}
	b = b[1:]
	var parts [3]string
	for i := range parts {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return outcome{}, fmt.Errorf("%w request outcome: names", errCorrupt)
		}
		parts[i] = string(b[w : w+int(n)])
		b = b[w+int(n):]
	}
	o.tenant, o.recKind, o.key = parts[0], Kind(parts[1]), parts[2]
	if o.kind == outcomeDelete {
		if len(b) != 1 {
			return outcome{}, fmt.Errorf("%w request outcome: deleted", errCorrupt)
		}
		o.deleted = b[0] == 1
		return o, nil
	}
	rec, err := decode(o.key, b, false)
	o.rec = rec
	return o, err
}

// findOutcome returns the recorded outcome of id, if any. An ID recorded
// for another record means two different writes share an ID, which only a
// broken client does.
func findOutcome(tx *bolt.Tx, id []byte, kind byte, tenant string, recKind Kind, key string) (outcome, bool, error) {
	b := tx.Bucket(bucketRequests)
	if len(id) == 0 || b == nil {
		return outcome{}, false, nil
	}
	v := b.Get(id)
	if v == nil {
		return outcome{}, false, nil
	}
	o, err := decodeOutcome(v)
	if err != nil {
		return outcome{}, false, err
	}
	if o.kind != kind || o.tenant != tenant || o.recKind != recKind || o.key != key {
		return outcome{}, false, fmt.Errorf("%w: request ID %x was already used for another write", ErrInvalid, id)
	}
	return o, true, nil
}

// recordOutcome keeps o under id, and now and then sweeps expired
// outcomes.
func (s *Bolt) recordOutcome(tx *bolt.Tx, id []byte, o outcome) error {
	if len(id) == 0 {
		return nil
	}
	b, err := tx.CreateBucketIfNotExists(bucketRequests)
	if err != nil {
		return err
	}
	if err := b.Put(id, encodeOutcome(o)); err != nil {
		return err
	}
	now := s.now()
	last := s.lastSweep.Load()
	if now.UnixNano()-last < int64(sweepEvery) || !s.lastSweep.CompareAndSwap(last, now.UnixNano()) {
		return nil
	}
	cutoff := uint64(now.Add(-requestRetention).UnixNano())
	c := b.Cursor()
	for n, k := 0, firstKey(c); n < sweepBatch && k != nil && binary.BigEndian.Uint64(k) < cutoff; n, k = n+1, firstKey(c) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// firstKey positions c on the bucket's first request ID, or returns nil.
func firstKey(c *bolt.Cursor) []byte {
	k, _ := c.First()
	if len(k) != RequestIDBytes {
		return nil
	}
	return k
}
