package bolt

import (
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/codeexec/codeexec/memoryd/internal/store"
)

var bucketRequests = []byte("requests")

func encodeOutcome(o store.Outcome) []byte {
	buf := []byte{o.Op}
	for _, s := range []string{o.Tenant, string(o.Kind), o.Key} {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	if o.Op == store.OutcomeDelete {
		if o.Deleted {
			return append(buf, 1)
		}
		return append(buf, 0)
	}
	r := o.Record
	r.Value, r.Meta = nil, nil
	return append(buf, encode(r)...)
}

func decodeOutcome(b []byte) (store.Outcome, error) {
	if len(b) == 0 || (b[0] != store.OutcomePut && b[0] != store.OutcomeDelete) {
		return store.Outcome{}, fmt.Errorf("%w request outcome: kind", errCorrupt)
	}
	o := store.Outcome{Op: b[0]}
	b = b[1:]
	var parts [3]string
	for i := range parts {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return store.Outcome{}, fmt.Errorf("%w request outcome: names", errCorrupt)
		}
		parts[i] = string(b[w : w+int(n)])
		b = b[w+int(n):]
	}
	o.Tenant, o.Kind, o.Key = parts[0], store.Kind(parts[1]), parts[2]
	if o.Op == store.OutcomeDelete {
		if len(b) != 1 {
			return store.Outcome{}, fmt.Errorf("%w request outcome: deleted", errCorrupt)
		}
		o.Deleted = b[0] == 1
		return o, nil
	}
	rec, err := decode(o.Key, b, false)
	o.Record = rec
	return o, err
}

// findOutcome returns the recorded outcome of id, if any. An ID recorded
// for another record means two different writes share an ID, which only a
// broken client does.
func findOutcome(tx *bbolt.Tx, id []byte, kind byte, tenant string, recKind store.Kind, key string) (store.Outcome, bool, error) {
	b := tx.Bucket(bucketRequests)
	if len(id) == 0 || b == nil {
		return store.Outcome{}, false, nil
	}
	v := b.Get(id)
	if v == nil {
		return store.Outcome{}, false, nil
	}
	o, err := decodeOutcome(v)
	if err != nil {
		return store.Outcome{}, false, err
	}
	if o.Op != kind || o.Tenant != tenant || o.Kind != recKind || o.Key != key {
		return store.Outcome{}, false, fmt.Errorf("%w: request ID %x was already used for another write", store.ErrInvalid, id)
	}
	return o, true, nil
}

// recordOutcome keeps o under id, and now and then sweeps expired
// outcomes.
func (s *Store) recordOutcome(tx *bbolt.Tx, id []byte, o store.Outcome) error {
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
	if now.UnixNano()-last < int64(store.SweepEvery) || !s.lastSweep.CompareAndSwap(last, now.UnixNano()) {
		return nil
	}
	cutoff := uint64(now.Add(-store.RequestRetention).UnixNano())
	c := b.Cursor()
	for n, k := 0, firstKey(c); n < store.SweepBatch && k != nil && binary.BigEndian.Uint64(k) < cutoff; n, k = n+1, firstKey(c) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// firstKey positions c on the bucket's first request ID, or returns nil.
func firstKey(c *bbolt.Cursor) []byte {
	k, _ := c.First()
	if len(k) != store.RequestIDBytes {
		return nil
	}
	return k
}
