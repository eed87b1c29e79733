package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The PostgreSQL schema is plain SQL files, migrations/NNNN_name.sql,
// applied in order. Each runs once, in one transaction with the row in
// codeexec_schema that records it, so a migration is either applied and
// recorded or neither. A transaction-level advisory lock serialises
// processes that start at once: the second waits, then finds the work
// done. A database whose schema is newer than this codeexec knows is
// refused rather than misread.

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLock is the advisory lock key of schema changes: "codeexec"
// in ASCII, so that it is recognisable in pg_locks.
const migrationLock = 0x636f6465_65786563

// migration is one numbered SQL file.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in order. Their numbers must
// run 1, 2, 3, … without gaps.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %s: want NNNN_name.sql", e.Name())
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: numbers must run from 1 without gaps", m.name)
		}
	}
	return out, nil
}

// SchemaVersion is the newest schema this codeexec knows.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		panic(err) // the embedded files are fixed at build time; a test catches this
	}
	return len(ms)
}

// migrate brings the database's schema up to date and returns the
// versions it applied.
func migrate(ctx context.Context, pool *pgxpool.Pool, by string) ([]int, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	var applied []int
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrationLock)); err != nil {
			return err
		}
		// Checked before creating, so that a role without CREATE can
		// use a database whose schema is up to date.
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass('codeexec_schema') IS NOT NULL").Scan(&exists); err != nil {
			return err
		}
		if !exists {
			_, err := tx.Exec(ctx, `CREATE TABLE codeexec_schema (
				version integer PRIMARY KEY,
				name    text        NOT NULL,
				applied timestamptz NOT NULL DEFAULT now(),
				by      text        NOT NULL
			)`)
			if err != nil {
				return err
			}
		}
		var have int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM codeexec_schema").Scan(&have); err != nil {
			return err
		}
		if have > len(ms) {
			return fmt.Errorf("the database's codeexec schema is at version %d, and this codeexec (%s) knows versions up to %d: upgrade codeexec, or use another database", have, by, len(ms))
		}
		for _, m := range ms[have:] {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("schema migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO codeexec_schema (version, name, by) VALUES ($1, $2, $3)", m.version, m.name, by); err != nil {
				return err
			}
			applied = append(applied, m.version)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}
