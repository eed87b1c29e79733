// Package postgres is the store.Store of a PostgreSQL database, which any
// number of memoryd processes share past one machine.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/tick"

	"github.com/codeexec/codeexec/memoryd/internal/store"
)

// DefaultWait bounds how long a call waits for an unreachable
// database. A managed database's failover to a standby takes from a few
// seconds to about a minute; half a minute covers the usual case without
// holding calls forever.
const DefaultWait = 30 * time.Second

// defaultPoolConns is the pool size unless the URL sets pool_max_conns:
// enough for 16 concurrent writers per memoryd, since each write holds a
// connection only for its one statement.
const defaultPoolConns = 16

// Options tune Open.
type Options struct {
	// PasswordFile, when set, holds the password (a trailing newline is
	// dropped). It is read again for every new connection, so that a
	// rotated secret is picked up without a restart.
	PasswordFile string
	// Wait bounds how long a call retries while the database cannot be
	// reached, or is failing over; 0 means DefaultWait. It also
	// bounds Open's wait for the database.
	Wait time.Duration
	// Now is the clock. Nil means the database's clock, which every
	// memoryd sharing the database reads alike.
	Now func() time.Time
	// TempDir holds Backup's scratch file; empty means os.TempDir().
	TempDir string
	// Version names this codeexec in the schema table and in the
	// connections' application_name.
	Version string
	// Logger receives schema changes and connection trouble.
	Logger *slog.Logger
}

// Store is a store.Store on a PostgreSQL database. It keeps no state of its
// own, so any number of processes can use one database at once: each
// write is one statement, atomic in the database, and compare-and-swap is
// a conditional UPDATE. Every acknowledged write has been committed with
// the server's synchronous_commit (forced on when the server has it off),
// and carries a request ID so that a retry across a failover applies once.
type Store struct {
	pool   *pgxpool.Pool
	opts   Options
	logger *slog.Logger

	closed    atomic.Bool
	stop      chan struct{}
	sweepDone chan struct{}
	closeOnce sync.Once

	// lastWarn rate-limits the "database unreachable" warning (Unix
	// nanoseconds).
	lastWarn atomic.Int64
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at url (postgres://…; libpq's
// PG* environment variables fill in what it leaves out), waiting up to
// opts.Wait for it to come up, and creates or migrates the schema.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	cfg, err := poolConfig(url, opts)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("memory database: %w", err)
	}
	s := &Store{pool: pool, opts: opts, logger: opts.Logger, stop: make(chan struct{}), sweepDone: make(chan struct{})}
	if err := s.migrateSchema(ctx); err != nil {
		pool.Close()
		if errors.Is(err, store.ErrUnavailable) {
			return nil, fmt.Errorf("memory database: no answer within %s (%s): %w", opts.Wait, describeHosts(cfg), err)
		}
		return nil, fmt.Errorf("memory database (%s): %w", describeHosts(cfg), err)
	}
	var fsync string
	if err := pool.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err == nil && fsync == "off" {
		s.logger.Warn("the memory database server runs with fsync off: a crash of its host can lose acknowledged writes")
	}
	go s.sweepLoop()
	return s, nil
}

// withDefaults fills in the zero fields of o.
func (o Options) withDefaults() Options {
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	return o
}

// poolConfig parses url and sets up the pool's connections: their size,
// name, password file and durability.
func poolConfig(url string, opts Options) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx quotes the connection string in parse errors, redacting
		// the password only where it recognises one: say what is wrong
		// without the string when it can.
		if cause := errors.Unwrap(err); cause != nil {
			err = cause
		}
		return nil, fmt.Errorf("memory database URL cannot be parsed: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = defaultPoolConns
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "codeexec memoryd " + opts.Version
	}
	if opts.PasswordFile != "" {
		path := opts.PasswordFile
		if _, err := readPassword(path); err != nil {
			return nil, err
		}
		cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
			pw, err := readPassword(path)
			cc.Password = pw
			return err
		}
	}
	cfg.AfterConnect = synchronousCommit(opts.Logger)
	return cfg, nil
}

// synchronousCommit returns the hook that makes each new connection's
// writes durable: a server (or role) with synchronous_commit off
// acknowledges a commit before the WAL is flushed, so the session turns
// it back on, warning once.
func synchronousCommit(logger *slog.Logger) func(context.Context, *pgx.Conn) error {
	var warn sync.Once
	return func(ctx context.Context, c *pgx.Conn) error {
		var sc string
		if err := c.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&sc); err != nil {
			return err
		}
		if sc != "off" {
			return nil
		}
		warn.Do(func() {
			logger.Warn("the memory database has synchronous_commit off; memoryd's sessions turn it on, so that every acknowledged write is flushed")
		})
		_, err := c.Exec(ctx, "SET synchronous_commit = on")
		return err
	}
}

// migrateSchema creates or migrates the schema, retrying while the database is
// unreachable, and logs the migrations it applied.
func (s *Store) migrateSchema(ctx context.Context) error {
	var applied []int
	err := s.retry(ctx, func(ctx context.Context, _ int) error {
		var err error
		applied, err = migrate(ctx, s.pool, "codeexec "+s.opts.Version)
		return err
	})
	if err == nil && len(applied) > 0 {
		s.logger.Info("memory database schema migrated", slog.Any("store.schema.applied", applied), slog.Int("store.schema.version", SchemaVersion()))
	}
	return err
}

// readPassword reads a password file.
func readPassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("memory database password file: %w", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("memory database password file %s is empty", path)
	}
	return pw, nil
}

// describeHosts names the hosts of a config, for errors: never the
// password.
func describeHosts(cfg *pgxpool.Config) string {
	hosts := []string{fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port)}
	for _, f := range cfg.ConnConfig.Fallbacks {
		hosts = append(hosts, fmt.Sprintf("%s:%d", f.Host, f.Port))
	}
	return fmt.Sprintf("user %s, database %s, hosts %s", cfg.ConnConfig.User, cfg.ConnConfig.Database, strings.Join(hosts, ","))
}

// args are the named parameters of the statements below.
func (s *Store) args(tenant string, kind store.Kind, key string) pgx.NamedArgs {
	return pgx.NamedArgs{"tenant": []byte(tenant), "kind": string(kind), "key": []byte(key)}
}

// now is the time a write stamps, or nil for the database's clock.
func (s *Store) now() any {
	if s.opts.Now == nil {
		return nil
	}
	return s.opts.Now().UTC()
}

const sqlTenants = `SELECT DISTINCT tenant FROM codeexec_records ORDER BY tenant`

// Tenants implements Store.
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	var out []string
	err := s.retry(ctx, func(ctx context.Context, _ int) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, sqlTenants)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t []byte
			if err := rows.Scan(&t); err != nil {
				return err
			}
			out = append(out, string(t))
		}
		return rows.Err()
	})
	return out, err
}

const sqlGet = `SELECT value, meta, created, updated, revision FROM codeexec_records
WHERE tenant = @tenant AND kind = @kind AND key = @key`

// Get implements Store.
func (s *Store) Get(ctx context.Context, tenant string, kind store.Kind, key string) (store.Record, error) {
	if err := s.usable(ctx); err != nil {
		return store.Record{}, err
	}
	var rec store.Record
	err := s.retry(ctx, func(ctx context.Context, _ int) error {
		rec = store.Record{Key: key}
		err := s.pool.QueryRow(ctx, sqlGet, s.args(tenant, kind, key)).Scan(&rec.Value, &rec.Meta, &rec.Created, &rec.Updated, &rec.Revision)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return store.Record{}, err
	}
	return fixRecord(rec, true), nil
}

// fixRecord makes a scanned record look like one that bbolt returns:
// times in UTC, non-nil slices, ValueLen set.
func fixRecord(r store.Record, withValue bool) store.Record {
	r.Created, r.Updated = r.Created.UTC(), r.Updated.UTC()
	if r.Meta == nil {
		r.Meta = []byte{}
	}
	if withValue {
		if r.Value == nil {
			r.Value = []byte{}
		}
		r.ValueLen = len(r.Value)
	}
	return r
}

const sqlList = `SELECT key, CASE WHEN @with_values::boolean THEN value END, octet_length(value), meta, created, updated, revision
FROM codeexec_records WHERE tenant = @tenant AND kind = @kind ORDER BY key`

// List implements Store.
func (s *Store) List(ctx context.Context, tenant string, kind store.Kind, withValues bool) ([]store.Record, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	var out []store.Record
	err := s.retry(ctx, func(ctx context.Context, _ int) error {
		out = nil
		a := s.args(tenant, kind, "")
		a["with_values"] = withValues
		rows, err := s.pool.Query(ctx, sqlList, a)
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				r   store.Record
				key []byte
			)
			if err := rows.Scan(&key, &r.Value, &r.ValueLen, &r.Meta, &r.Created, &r.Updated, &r.Revision); err != nil {
				rows.Close()
				return err
			}
			r.Key = string(key)
			out = append(out, fixRecord(r, withValues))
		}
		return rows.Err()
	})
	return out, err
}

// usable fails calls after Close and calls whose context is done.
func (s *Store) usable(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// Close implements Store: it stops the sweeper and closes the pool,
// after the calls in progress have returned their connections.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		<-s.sweepDone
		s.pool.Close()
	})
	return nil
}

// sweepLoop removes expired request outcomes every SweepEvery. Every
// memoryd on the database sweeps; the deletes are idempotent.
func (s *Store) sweepLoop() {
	defer close(s.sweepDone)
	tick.Every(s.stop, store.SweepEvery, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n, err := s.sweep(ctx, store.RequestRetention)
		cancel()
		if err != nil {
			s.logger.Debug("sweeping expired request outcomes failed", slog.Any(logkeys.Error, err))
		} else if n > 0 {
			s.logger.Debug("swept expired request outcomes", slog.Int64("store.outcomes", n))
		}
	})
}

const sqlSweep = `DELETE FROM codeexec_requests WHERE id IN (
	SELECT id FROM codeexec_requests WHERE at < statement_timestamp() - @age::interval LIMIT @batch
)`

// sweep removes outcomes older than age, SweepBatch at a time, and
// returns how many it removed.
func (s *Store) sweep(ctx context.Context, age time.Duration) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, sqlSweep, pgx.NamedArgs{"age": age, "batch": store.SweepBatch})
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < store.SweepBatch {
			return total, nil
		}
		select {
		case <-s.stop:
			return total, nil
		default:
		}
	}
}
