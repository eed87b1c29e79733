package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	"github.com/codeexec/codeexec/memoryd/internal/store/bolt"
)

const sqlWalk = `SELECT tenant, kind, key, value, meta, created, updated, revision
FROM codeexec_records ORDER BY tenant, kind, key`

// Walk implements Transfer in one REPEATABLE READ transaction, which
// sees one committed state while writers go on.
func (s *Store) Walk(ctx context.Context, fn func(store.Entry) error) error {
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
				e           store.Entry
				tenant, key []byte
				kind        string
			)
			if err := rows.Scan(&tenant, &kind, &key, &e.Record.Value, &e.Record.Meta, &e.Record.Created, &e.Record.Updated, &e.Record.Revision); err != nil {
				return err
			}
			e.Tenant, e.Kind, e.Record.Key = string(tenant), store.Kind(kind), string(key)
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
func (s *Store) Import(ctx context.Context, entries []store.Entry, replace bool) ([]store.ImportResult, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := store.CheckEntry(e); err != nil {
			return nil, err
		}
	}
	results := make([]store.ImportResult, len(entries))
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
				results[i] = store.Added
				if tag.RowsAffected() == 1 {
					continue
				}
				old := store.Record{Key: e.Record.Key}
				if err := tx.QueryRow(ctx, sqlGet, a).Scan(&old.Value, &old.Meta, &old.Created, &old.Updated, &old.Revision); err != nil {
					return err
				}
				switch {
				case store.Same(fixRecord(old, true), e.Record):
					results[i] = store.Unchanged
					continue
				case !replace:
					results[i] = store.Differs
					continue
				}
				if _, err := tx.Exec(ctx, sqlImportReplace, a); err != nil {
					return err
				}
				results[i] = store.Replaced
			}
			return nil
		})
	})
	return results, err
}

// Backup implements Store: it writes the database's records, from one
// snapshot, as a bbolt file of the same layout as store/bolt's, which memoryd
// opens with --db and `memoryd copy` takes back into PostgreSQL. The file
// is built in a scratch directory under opts.TempDir first.
func (s *Store) Backup(ctx context.Context, w io.Writer) (int64, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp(s.opts.TempDir, "memoryd-backup-")
	if err != nil {
		return 0, fmt.Errorf("backup scratch directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	b, err := bolt.Open(filepath.Join(dir, "backup.db"), bolt.Options{})
	if err != nil {
		return 0, err
	}
	defer func() { _ = b.Close() }()
	if err := store.Copy(ctx, s, b, false, nil); err != nil {
		return 0, err
	}
	return b.Backup(ctx, w)
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
