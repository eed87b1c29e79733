package bolt

import (
	"context"

	bbolt "go.etcd.io/bbolt"

	"github.com/codeexec/codeexec/memoryd/internal/store"
)

// Walk implements Transfer in one read transaction.
func (s *Store) Walk(ctx context.Context, fn func(store.Entry) error) error {
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketTenants).ForEachBucket(func(tenant []byte) error {
			t := tx.Bucket(bucketTenants).Bucket(tenant)
			return t.ForEachBucket(func(kind []byte) error {
				return t.Bucket(kind).ForEach(func(k, v []byte) error {
					if err := ctx.Err(); err != nil {
						return err
					}
					rec, err := decode(string(k), v, true)
					if err != nil {
						return err
					}
					return fn(store.Entry{Tenant: string(tenant), Kind: store.Kind(kind), Record: rec})
				})
			})
		})
	})
	return closed(err)
}

// Import implements Transfer.
func (s *Store) Import(ctx context.Context, entries []store.Entry, replace bool) ([]store.ImportResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := store.CheckEntry(e); err != nil {
			return nil, err
		}
	}
	results := make([]store.ImportResult, len(entries))
	err := s.db.Update(func(tx *bbolt.Tx) error {
		for i, e := range entries {
			t, err := tx.Bucket(bucketTenants).CreateBucketIfNotExists([]byte(e.Tenant))
			if err != nil {
				return err
			}
			b, err := t.CreateBucketIfNotExists([]byte(e.Kind))
			if err != nil {
				return err
			}
			results[i] = store.Added
			if v := b.Get([]byte(e.Record.Key)); v != nil {
				old, err := decode(e.Record.Key, v, true)
				if err != nil {
					return err
				}
				switch {
				case store.Same(old, e.Record):
					results[i] = store.Unchanged
					continue
				case !replace:
					results[i] = store.Differs
					continue
				}
				results[i] = store.Replaced
			}
			if err := b.Put([]byte(e.Record.Key), encode(e.Record)); err != nil {
				return err
			}
		}
		return nil
	})
	return results, closed(err)
}
