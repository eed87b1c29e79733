package store

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
)

// DefaultPostgresWait bounds how long a call waits for an unreachable
// database. A managed database's failover to a standby takes from a few
// seconds to about a minute; half a minute covers the usual case without
// holding calls forever.
const DefaultPostgresWait = 30 * time.Second

// defaultPoolConns is the pool size unless the URL sets pool_max_conns:
// enough for 16 concurrent writers per memoryd, since each write holds a
// connection only for its one statement.
const defaultPoolConns = 16

// PostgresOptions tune OpenPostgres.
type PostgresOptions struct {
	// PasswordFile, when set, holds the password (a trailing newline is
	// dropped). It is read again for every new connection, so that a
	// rotated secret is picked up without a restart.
	PasswordFile string
	// Wait bounds how long a call retries while the database cannot be
	// reached, or is failing over; 0 means DefaultPostgresWait. It also
	// bounds OpenPostgres's wait for the database.
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

// Postgres is a Store on a PostgreSQL database. It keeps no state of its
// own, so any number of processes can use one database at once: each
// write is one statement, atomic in the database, and compare-and-swap is
// a conditional UPDATE. Every acknowledged write has been committed with
// the server's synchronous_commit (forced on when the server has it off),
// and carries a request ID so that a retry across a failover applies once.
type Postgres struct {
	pool   *pgxpool.Pool
	opts   PostgresOptions
	logger *slog.Logger

	closed    atomic.Bool
	stop      chan struct{}
	sweepDone chan struct{}
	closeOnce sync.Once

	// lastWarn rate-limits the "database unreachable" warning (Unix
	// nanoseconds).
	lastWarn atomic.Int64
}

var _ Store = (*Postgres)(nil)

// OpenPostgres connects to the database at url (postgres://…; libpq's
// PG* environment variables fill in what it leaves out), waiting up to
// opts.Wait for it to come up, and creates or migrates the schema.
func OpenPostgres(ctx context.Context, url string, opts PostgresOptions) (*Postgres, error) {
	if opts.Wait <= 0 {
		opts.Wait = DefaultPostgresWait
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx redacts passwords in parse errors only as far as it can
		// recognise them, so the string itself is not repeated here.
		return nil, fmt.Errorf("memory database URL: %w", errors.Unwrap(err))
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
	var syncWarn sync.Once
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		// An acknowledged write must be durable: a server (or role)
		// with synchronous_commit off acknowledges before the WAL is
		// flushed, so this session turns it back on.
		var sc string
		if err := c.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&sc); err != nil {
			return err
		}
		if sc == "off" {
			syncWarn.Do(func() {
				opts.Logger.Warn("the memory database has synchronous_commit off; memoryd's sessions turn it on, so that every acknowledged write is flushed")
			})
			_, err := c.Exec(ctx, "SET synchronous_commit = on")
			return err
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("memory database: %w", err)
	}
	s := &Postgres{pool: pool, opts: opts, logger: opts.Logger, stop: make(chan struct{}), sweepDone: make(chan struct{})}
	var applied []int
	err = s.retry(ctx, func(ctx context.Context, _ int) error {
		var err error
		applied, err = migrate(ctx, pool, "codeexec "+opts.Version)
		return err
	})
	if err != nil {
		pool.Close()
		if errors.Is(err, ErrUnavailable) {
			return nil, fmt.Errorf("memory database: no answer within %s (%s): %w", opts.Wait, describeHosts(cfg), err)
		}
		return nil, fmt.Errorf("memory database (%s): %w", describeHosts(cfg), err)
	}
	if len(applied) > 0 {
		s.logger.Info("memory database schema migrated", slog.Any("versions", applied), slog.Int("schema", SchemaVersion()))
	}
	var fsync string
	if err := pool.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err == nil && fsync == "off" {
		s.logger.Warn("the memory database server runs with fsync off: a crash of its host can lose acknowledged writes")
	}
	go s.sweepLoop()
	return s, nil
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
func (s *Postgres) args(tenant string, kind Kind, key string) pgx.NamedArgs {
	return pgx.NamedArgs{"tenant": []byte(tenant), "kind": string(kind), "key": []byte(key)}
}

// now is the time a write stamps, or nil for the database's clock.
func (s *Postgres) now() any {
	if s.opts.Now == nil {
		return nil
	}
	return s.opts.Now().UTC()
}

const sqlGet = `SELECT value, meta, created, updated, revision FROM codeexec_records
WHERE tenant = @tenant AND kind = @kind AND key = @key`

// Get implements Store.
func (s *Postgres) Get(ctx context.Context, tenant string, kind Kind, key string) (Record, error) {
	if err := s.usable(ctx); err != nil {
		return Record{}, err
	}
	var rec Record
	err := s.retry(ctx, func(ctx context.Context, _ int) error {
		rec = Record{Key: key}
		err := s.pool.QueryRow(ctx, sqlGet, s.args(tenant, kind, key)).Scan(&rec.Value, &rec.Meta, &rec.Created, &rec.Updated, &rec.Revision)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		return err
	})
	if err != nil {
		return Record{}, err
	}
	return fixRecord(rec, true), nil
}

// fixRecord makes a scanned record look like one that bbolt returns:
// times in UTC, non-nil slices, ValueLen set.
func fixRecord(r Record, withValue bool) Record {
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

// The three shapes of a Put: an upsert, an insert that only creates
// (compare-and-swap on "absent"), and an update of one revision. Each is
// one statement that also records the outcome under the request ID, in
// the same implicit transaction. Under READ COMMITTED a concurrent
// writer's UPDATE waits for the row lock and then re-checks the
// revision, so compare-and-swap holds across processes.
const (
	sqlPutUpsert = `WITH w AS (
	INSERT INTO codeexec_records AS r (tenant, kind, key, value, meta, created, updated, revision)
	VALUES (@tenant, @kind, @key, @value, @meta, coalesce(@now::timestamptz, statement_timestamp()), coalesce(@now::timestamptz, statement_timestamp()), 1)
	ON CONFLICT (tenant, kind, key) DO UPDATE
	SET value = excluded.value,
	    meta = CASE WHEN @keep_meta::boolean THEN r.meta ELSE excluded.meta END,
	    updated = excluded.updated,
	    revision = r.revision + 1
	RETURNING r.meta, r.created, r.updated, r.revision
)` + sqlPutOutcome

	sqlPutCreate = `WITH w AS (
	INSERT INTO codeexec_records (tenant, kind, key, value, meta, created, updated, revision)
	VALUES (@tenant, @kind, @key, @value, @meta, coalesce(@now::timestamptz, statement_timestamp()), coalesce(@now::timestamptz, statement_timestamp()), 1)
	ON CONFLICT (tenant, kind, key) DO NOTHING
	RETURNING meta, created, updated, revision
)` + sqlPutOutcome

	sqlPutSwap = `WITH w AS (
	UPDATE codeexec_records AS r
	SET value = @value,
	    meta = CASE WHEN @keep_meta::boolean THEN r.meta ELSE @meta::bytea END,
	    updated = coalesce(@now::timestamptz, statement_timestamp()),
	    revision = r.revision + 1
	WHERE tenant = @tenant AND kind = @kind AND key = @key AND revision = @revision
	RETURNING r.meta, r.created, r.updated, r.revision
)` + sqlPutOutcome

	sqlPutOutcome = `, o AS (
	INSERT INTO codeexec_requests (id, at, op, tenant, kind, key, revision, created, updated, value_len)
	SELECT @id, statement_timestamp(), 1, @tenant, @kind, @key, w.revision, w.created, w.updated, @value_len FROM w
)
SELECT meta, created, updated, revision FROM w`

	sqlRevision = `SELECT revision FROM codeexec_records WHERE tenant = @tenant AND kind = @kind AND key = @key`
)

// Put implements Store.
func (s *Postgres) Put(ctx context.Context, tenant string, kind Kind, key string, w Write) (Record, error) {
	if err := s.usable(ctx); err != nil {
		return Record{}, err
	}
	if err := checkRequestID(w.RequestID); err != nil {
		return Record{}, err
	}
	// Every write gets a request ID, since any attempt may lose its
	// answer to a failover; the caller's ID may already have been used.
	id, fresh := w.RequestID, false
	if len(id) == 0 {
		id, fresh = NewRequestID(time.Now()), true
	}
	var rec Record
	err := s.retry(ctx, func(ctx context.Context, attempt int) error {
		if !fresh || attempt > 1 {
			o, ok, err := s.findOutcome(ctx, id, outcomePut, tenant, kind, key)
			if err != nil {
				return err
			}
			if ok {
				rec, err = s.replayPut(ctx, tenant, kind, key, o.rec)
				return err
			}
		}
		var err error
		rec, err = s.put(ctx, tenant, kind, key, w, id)
		return err
	})
	return rec, err
}

func (s *Postgres) put(ctx context.Context, tenant string, kind Kind, key string, w Write, id []byte) (Record, error) {
	a := s.args(tenant, kind, key)
	a["value"], a["meta"], a["keep_meta"] = nonNil(w.Value), nonNil(w.Meta), w.KeepMeta
	a["id"], a["value_len"], a["now"] = id, len(w.Value), s.now()
	q := sqlPutUpsert
	if w.CheckRevision {
		q = sqlPutCreate
		if w.Revision != 0 {
			q = sqlPutSwap
			if w.Revision > maxRevision {
				return Record{}, conflict(key, 0, w.Revision)
			}
			a["revision"] = int64(w.Revision)
		}
	}
	rec := Record{Key: key, Value: w.Value, ValueLen: len(w.Value)}
	err := s.pool.QueryRow(ctx, q, a).Scan(&rec.Meta, &rec.Created, &rec.Updated, &rec.Revision)
	if errors.Is(err, pgx.ErrNoRows) {
		// Only the compare-and-swap shapes return nothing. The current
		// revision is read for the message only.
		var have uint64
		if err := s.pool.QueryRow(ctx, sqlRevision, a).Scan(&have); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return Record{}, err
		}
		if have == w.Revision {
			have = 0 // deleted and written again meanwhile; say "changed"
		}
		return Record{}, conflict(key, have, w.Revision)
	}
	if err != nil {
		return Record{}, err
	}
	return fixRecord(rec, false), nil
}

// maxRevision is the largest revision a bigint column holds.
const maxRevision = 1<<63 - 1

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// replayPut answers a retried write as Bolt's replayPut does: the record
// as it is now when nothing wrote the key since, else what the first
// attempt wrote, without its value.
func (s *Postgres) replayPut(ctx context.Context, tenant string, kind Kind, key string, first Record) (Record, error) {
	var cur Record
	err := s.pool.QueryRow(ctx, sqlGet, s.args(tenant, kind, key)).Scan(&cur.Value, &cur.Meta, &cur.Created, &cur.Updated, &cur.Revision)
	if errors.Is(err, pgx.ErrNoRows) {
		return first, nil
	}
	if err != nil {
		return Record{}, err
	}
	if cur.Revision == first.Revision {
		cur.Key = key
		return fixRecord(cur, true), nil
	}
	return first, nil
}

const sqlOutcome = `SELECT op, tenant, kind, key, coalesce(deleted, false), coalesce(revision, 0),
	coalesce(created, 'epoch'), coalesce(updated, 'epoch'), coalesce(value_len, 0)
FROM codeexec_requests WHERE id = @id`

// findOutcome returns the recorded outcome of id, if any, and refuses an
// ID recorded for another write.
func (s *Postgres) findOutcome(ctx context.Context, id []byte, op byte, tenant string, kind Kind, key string) (outcome, bool, error) {
	var (
		o               outcome
		gotTenant, key2 []byte
		gotKind         string
		gotOp           int16
		valueLen        int
	)
	err := s.pool.QueryRow(ctx, sqlOutcome, pgx.NamedArgs{"id": id}).Scan(&gotOp, &gotTenant, &gotKind, &key2,
		&o.deleted, &o.rec.Revision, &o.rec.Created, &o.rec.Updated, &valueLen)
	if errors.Is(err, pgx.ErrNoRows) {
		return outcome{}, false, nil
	}
	if err != nil {
		return outcome{}, false, err
	}
	if byte(gotOp) != op || string(gotTenant) != tenant || Kind(gotKind) != kind || string(key2) != key {
		return outcome{}, false, fmt.Errorf("%w: request ID %x was already used for another write", ErrInvalid, id)
	}
	o.kind, o.tenant, o.recKind, o.key = op, tenant, kind, key
	o.rec.Key, o.rec.ValueLen = key, valueLen
	o.rec.Created, o.rec.Updated = o.rec.Created.UTC(), o.rec.Updated.UTC()
	return o, true, nil
}

const sqlDelete = `WITH d AS (
	DELETE FROM codeexec_records WHERE tenant = @tenant AND kind = @kind AND key = @key RETURNING 1
), o AS (
	INSERT INTO codeexec_requests (id, at, op, tenant, kind, key, deleted)
	SELECT @id, statement_timestamp(), 2, @tenant, @kind, @key, EXISTS (SELECT 1 FROM d)
)
SELECT EXISTS (SELECT 1 FROM d)`

// Delete implements Store.
func (s *Postgres) Delete(ctx context.Context, tenant string, kind Kind, key string, requestID []byte) (bool, error) {
	if err := s.usable(ctx); err != nil {
		return false, err
	}
	if err := checkRequestID(requestID); err != nil {
		return false, err
	}
	id, fresh := requestID, false
	if len(id) == 0 {
		id, fresh = NewRequestID(time.Now()), true
	}
	var deleted bool
	err := s.retry(ctx, func(ctx context.Context, attempt int) error {
		if !fresh || attempt > 1 {
			o, ok, err := s.findOutcome(ctx, id, outcomeDelete, tenant, kind, key)
			if err != nil || ok {
				deleted = o.deleted
				return err
			}
		}
		a := s.args(tenant, kind, key)
		a["id"] = id
		return s.pool.QueryRow(ctx, sqlDelete, a).Scan(&deleted)
	})
	return deleted, err
}

const sqlList = `SELECT key, CASE WHEN @with_values::boolean THEN value END, octet_length(value), meta, created, updated, revision
FROM codeexec_records WHERE tenant = @tenant AND kind = @kind ORDER BY key`

// List implements Store.
func (s *Postgres) List(ctx context.Context, tenant string, kind Kind, withValues bool) ([]Record, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	var out []Record
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
				r   Record
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
func (s *Postgres) usable(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// Close implements Store: it stops the sweeper and closes the pool,
// after the calls in progress have returned their connections.
func (s *Postgres) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		<-s.sweepDone
		s.pool.Close()
	})
	return nil
}

// sweepLoop removes expired request outcomes every sweepEvery. Every
// memoryd on the database sweeps; the deletes are idempotent.
func (s *Postgres) sweepLoop() {
	defer close(s.sweepDone)
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n, err := s.sweep(ctx, requestRetention)
		cancel()
		if err != nil {
			s.logger.Debug("sweeping expired request outcomes failed", slog.Any("error", err))
		} else if n > 0 {
			s.logger.Debug("swept expired request outcomes", slog.Int64("outcomes", n))
		}
	}
}

const sqlSweep = `DELETE FROM codeexec_requests WHERE id IN (
	SELECT id FROM codeexec_requests WHERE at < statement_timestamp() - @age::interval LIMIT @batch
)`

// sweep removes outcomes older than age, sweepBatch at a time, and
// returns how many it removed.
func (s *Postgres) sweep(ctx context.Context, age time.Duration) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, sqlSweep, pgx.NamedArgs{"age": age, "batch": sweepBatch})
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < sweepBatch {
			return total, nil
		}
		select {
		case <-s.stop:
			return total, nil
		default:
		}
	}
}
