package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	bolt "go.etcd.io/bbolt"
)

// Moving records between stores (memoryd copy, and PostgreSQL's Backup,
// which writes a bbolt file): Walk reads every record of a store as it
// is, and Import writes records keeping their revisions and times. Both
// stores implement both, so a copy works in either direction.

// Entry is one record with its tenant and kind.
type Entry struct {
	Tenant string
	Kind   Kind
	Record Record
}

// ImportResult is what Import did with one entry.
type ImportResult int

// Import results.
const (
	// Added means the key was absent and now holds the entry.
	Added ImportResult = iota + 1
	// Unchanged means the key already held the same record (same
	// revision, times, value and metadata): a copy run again.
	Unchanged
	// Differs means the key holds another record, which was left alone.
	Differs
	// Replaced means the key held another record and now holds the
	// entry (Import's replace was set).
	Replaced
)

// Transfer is what a store offers for copies.
type Transfer interface {
	// Walk calls fn for every record of every tenant and kind, with
	// values, from one consistent snapshot.
	Walk(ctx context.Context, fn func(Entry) error) error
	// Import writes entries as they are, revisions and times included,
	// in one transaction. A key that exists is left alone unless
	// replace is set.
	Import(ctx context.Context, entries []Entry, replace bool) ([]ImportResult, error)
}

var (
	_ Transfer = (*Bolt)(nil)
	_ Transfer = (*Postgres)(nil)
)

// same reports whether two records are the same write. Times are
// compared to the microsecond, which is what PostgreSQL keeps of bbolt's
// nanoseconds.
func same(a, b Record) bool {
	return a.Revision == b.Revision && bytes.Equal(a.Value, b.Value) && bytes.Equal(a.Meta, b.Meta) &&
		a.Created.Truncate(time.Microsecond).Equal(b.Created.Truncate(time.Microsecond)) &&
		a.Updated.Truncate(time.Microsecond).Equal(b.Updated.Truncate(time.Microsecond))
}

// checkEntry refuses entries that no store could have written.
func checkEntry(e Entry) error {
	if e.Tenant == "" || e.Record.Key == "" || e.Kind == "" || e.Record.Revision == 0 || e.Record.Revision > maxRevision {
		return fmt.Errorf("%w: record %q of tenant %q (kind %q, revision %d) cannot be imported", ErrInvalid, e.Record.Key, e.Tenant, e.Kind, e.Record.Revision)
	}
	return nil
}

// Walk implements Transfer in one read transaction.
func (s *Bolt) Walk(ctx context.Context, fn func(Entry) error) error {
	err := s.db.View(func(tx *bolt.Tx) error {
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
					return fn(Entry{Tenant: string(tenant), Kind: Kind(kind), Record: rec})
				})
			})
		})
	})
	return closed(err)
}

// Import implements Transfer.
func (s *Bolt) Import(ctx context.Context, entries []Entry, replace bool) ([]ImportResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := checkEntry(e); err != nil {
			return nil, err
		}
	}
	results := make([]ImportResult, len(entries))
	err := s.db.Update(func(tx *bolt.Tx) error {
		for i, e := range entries {
			t, err := tx.Bucket(bucketTenants).CreateBucketIfNotExists([]byte(e.Tenant))
			if err != nil {
				return err
			}
			b, err := t.CreateBucketIfNotExists([]byte(e.Kind))
			if err != nil {
				return err
			}
			results[i] = Added
			if v := b.Get([]byte(e.Record.Key)); v != nil {
				old, err := decode(e.Record.Key, v, true)
				if err != nil {
					return err
				}
				switch {
				case same(old, e.Record):
					results[i] = Unchanged
					continue
				case !replace:
					results[i] = Differs
					continue
				}
				results[i] = Replaced
			}
			if err := b.Put([]byte(e.Record.Key), encode(e.Record)); err != nil {
				return err
			}
		}
		return nil
	})
	return results, closed(err)
}

const sqlWalk = `SELECT tenant, kind, key, value, meta, created, updated, revision
FROM codeexec_records ORDER BY tenant, kind, key`

// Walk implements Transfer in one REPEATABLE READ transaction, which
// sees one committed state while writers go on.
func (s *Postgres) Walk(ctx context.Context, fn func(Entry) error) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	started := false
	return s.retry(ctx, func(ctx context.Context, _ int) error {
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		rows, err := tx.Query(ctx, sqlWalk)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				e           Entry
				tenant, key []byte
				kind        string
			)
			if err := rows.Scan(&tenant, &kind, &key, &e.Record.Value, &e.Record.Meta, &e.Record.Created, &e.Record.Updated, &e.Record.Revision); err != nil {
				return err
			}
			e.Tenant, e.Kind, e.Record.Key = string(tenant), Kind(kind), string(key)
			e.Record = fixRecord(e.Record, true)
			started = true
			if err := fn(e); err != nil {
				return permanent{err}
			}
		}
		if err := rows.Err(); err != nil && started {
			// Half the records went out: a retry would send them twice.
			return permanent{err}
		} else if err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
}

// permanent marks an error that retry must return as it is.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

const (
	sqlImport = `INSERT INTO codeexec_records (tenant, kind, key, value, meta, created, updated, revision)
VALUES (@tenant, @kind, @key, @value, @meta, @created, @updated, @revision)
ON CONFLICT (tenant, kind, key) DO NOTHING`
	sqlImportReplace = `UPDATE codeexec_records SET value = @value, meta = @meta, created = @created, updated = @updated, revision = @revision
WHERE tenant = @tenant AND kind = @kind AND key = @key`
)

// Import implements Transfer.
func (s *Postgres) Import(ctx context.Context, entries []Entry, replace bool) ([]ImportResult, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := checkEntry(e); err != nil {
			return nil, err
		}
	}
	results := make([]ImportResult, len(entries))
	err := s.retry(ctx, func(ctx context.Context, _ int) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			for i, e := range entries {
				a := pgx.NamedArgs{
					"tenant": []byte(e.Tenant), "kind": string(e.Kind), "key": []byte(e.Record.Key),
					"value": nonNil(e.Record.Value), "meta": nonNil(e.Record.Meta),
					"created": e.Record.Created.UTC(), "updated": e.Record.Updated.UTC(), "revision": int64(e.Record.Revision),
				}
				tag, err := tx.Exec(ctx, sqlImport, a)
				if err != nil {
					return err
				}
				results[i] = Added
				if tag.RowsAffected() == 1 {
					continue
				}
				old := Record{Key: e.Record.Key}
				if err := tx.QueryRow(ctx, sqlGet, a).Scan(&old.Value, &old.Meta, &old.Created, &old.Updated, &old.Revision); err != nil {
					return err
				}
				switch {
				case same(fixRecord(old, true), e.Record):
					results[i] = Unchanged
					continue
				case !replace:
					results[i] = Differs
					continue
				}
				if _, err := tx.Exec(ctx, sqlImportReplace, a); err != nil {
					return err
				}
				results[i] = Replaced
			}
			return nil
		})
	})
	return results, err
}

// backupBatch is how many records Backup writes per bbolt transaction.
const backupBatch = 1024

// Backup implements Store: it writes the database's records, from one
// snapshot, as a bbolt file of the same layout as Bolt's, which memoryd
// opens with --db and `memoryd copy` takes back into PostgreSQL. The file
// is built in a scratch directory under opts.TempDir first.
func (s *Postgres) Backup(ctx context.Context, w io.Writer) (int64, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp(s.opts.TempDir, "memoryd-backup-")
	if err != nil {
		return 0, fmt.Errorf("backup scratch directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	b, err := OpenBolt(filepath.Join(dir, "backup.db"), BoltOptions{})
	if err != nil {
		return 0, err
	}
	defer func() { _ = b.Close() }()
	if err := Copy(ctx, s, b, false, nil); err != nil {
		return 0, err
	}
	return b.Backup(ctx, w)
}

// Copy walks from and imports every record into to, in batches, and
// calls report (when not nil) with each entry and what became of it.
func Copy(ctx context.Context, from, to Transfer, replace bool, report func(Entry, ImportResult)) error {
	batch := make([]Entry, 0, backupBatch)
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := to.Import(ctx, batch, replace)
		if err != nil {
			return err
		}
		if report != nil {
			for i, e := range batch {
				report(e, res[i])
			}
		}
		batch, size = batch[:0], 0
		return nil
	}
	err := from.Walk(ctx, func(e Entry) error {
		batch = append(batch, e)
		// Large values (session checkpoints) flush early, so that a
		// batch stays a modest transaction.
		size += len(e.Record.Value) + len(e.Record.Meta)
		if len(batch) == cap(batch) || size > 32<<20 {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// permanentCause returns what retry must return as it is when err is
// permanent, else nil.
func permanentCause(err error) error {
	var p permanent
	if errors.As(err, &p) {
		return p.error
	}
	return nil
}
