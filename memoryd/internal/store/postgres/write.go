package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codeexec/codeexec/memoryd/internal/store"
)

// Writes on PostgreSQL: Put and Delete, each one statement that also
// records its outcome under the request ID, and the replay of a retried
// write from that outcome.

// The three shapes of a Put: an upsert, an insert that only creates
// (compare-and-swap on "absent"), and an update of one revision. Each is
// one statement that also records the outcome under the request ID, in
// the same implicit transaction. Under READ COMMITTED a concurrent
// writer's UPDATE waits for the row lock and then re-checks the
// revision, so compare-and-swap holds across processes.
const (
	sqlPutUpsert = `WITH w AS (
	INSERT INTO codeexec_records AS r (tenant, kind, key, value, meta, created, updated, revision)
	VALUES (@tenant, @kind, @key, @value, @meta, coalesce(@created::timestamptz, @now::timestamptz, statement_timestamp()), coalesce(@updated::timestamptz, @now::timestamptz, statement_timestamp()), 1)
	ON CONFLICT (tenant, kind, key) DO UPDATE
	SET value = excluded.value,
	    meta = CASE WHEN @keep_meta::boolean THEN r.meta ELSE excluded.meta END,
	    created = coalesce(@created::timestamptz, r.created),
	    updated = excluded.updated,
	    revision = r.revision + 1
	RETURNING r.meta, r.created, r.updated, r.revision
)` + sqlPutOutcome

	sqlPutCreate = `WITH w AS (
	INSERT INTO codeexec_records (tenant, kind, key, value, meta, created, updated, revision)
	VALUES (@tenant, @kind, @key, @value, @meta, coalesce(@created::timestamptz, @now::timestamptz, statement_timestamp()), coalesce(@updated::timestamptz, @now::timestamptz, statement_timestamp()), 1)
	ON CONFLICT (tenant, kind, key) DO NOTHING
	RETURNING meta, created, updated, revision
)` + sqlPutOutcome

	sqlPutSwap = `WITH w AS (
	UPDATE codeexec_records AS r
	SET value = @value,
	    meta = CASE WHEN @keep_meta::boolean THEN r.meta ELSE @meta::bytea END,
	    created = coalesce(@created::timestamptz, r.created),
	    updated = coalesce(@updated::timestamptz, @now::timestamptz, statement_timestamp()),
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
func (s *Store) Put(ctx context.Context, tenant string, kind store.Kind, key string, w store.Write) (store.Record, error) {
	id, fresh, err := s.startWrite(ctx, w.RequestID)
	if err != nil {
		return store.Record{}, err
	}
	var rec store.Record
	err = s.retry(ctx, func(ctx context.Context, attempt int) error {
		if !fresh || attempt > 1 {
			o, ok, err := s.findOutcome(ctx, id, store.OutcomePut, tenant, kind, key)
			if err != nil {
				return err
			}
			if ok {
				rec, err = s.replayPut(ctx, tenant, kind, key, o.Record)
				return err
			}
		}
		var err error
		rec, err = s.put(ctx, tenant, kind, key, w, id)
		return err
	})
	return rec, err
}

// startWrite makes the checks every write starts with, and gives the
// write a request ID when the caller gave none: every write gets one,
// since any attempt may lose its answer to a failover. fresh reports a new
// ID, which no earlier attempt can have used; the caller's may have been.
func (s *Store) startWrite(ctx context.Context, requestID []byte) (id []byte, fresh bool, err error) {
	if err := s.usable(ctx); err != nil {
		return nil, false, err
	}
	if err := store.CheckRequestID(requestID); err != nil {
		return nil, false, err
	}
	if len(requestID) == 0 {
		return store.NewRequestID(time.Now()), true, nil
	}
	return requestID, false, nil
}

func (s *Store) put(ctx context.Context, tenant string, kind store.Kind, key string, w store.Write, id []byte) (store.Record, error) {
	a := s.args(tenant, kind, key)
	a["value"], a["meta"], a["keep_meta"] = nonNil(w.Value), nonNil(w.Meta), w.KeepMeta
	a["id"], a["value_len"], a["now"] = id, len(w.Value), s.now()
	// An import's own times, else the clock's (nil leaves it to the
	// statement's coalesce).
	a["created"], a["updated"] = optionalTime(w.Created), optionalTime(w.Updated)
	q := sqlPutUpsert
	if w.CheckRevision {
		q = sqlPutCreate
		if w.Revision != 0 {
			q = sqlPutSwap
			if w.Revision > store.MaxRevision {
				return store.Record{}, store.Conflict(key, 0, w.Revision)
			}
			a["revision"] = int64(w.Revision)
		}
	}
	rec := store.Record{Key: key, Value: w.Value, ValueLen: len(w.Value)}
	err := s.pool.QueryRow(ctx, q, a).Scan(&rec.Meta, &rec.Created, &rec.Updated, &rec.Revision)
	if errors.Is(err, pgx.ErrNoRows) {
		// Only the compare-and-swap shapes return nothing. The current
		// revision is read for the message only.
		var have uint64
		if err := s.pool.QueryRow(ctx, sqlRevision, a).Scan(&have); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return store.Record{}, err
		}
		if have == w.Revision {
			have = 0 // deleted and written again meanwhile; say "changed"
		}
		return store.Record{}, store.Conflict(key, have, w.Revision)
	}
	if err != nil {
		return store.Record{}, err
	}
	return fixRecord(rec, false), nil
}

// optionalTime is t in UTC, or nil for the zero time.
func optionalTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// replayPut answers a retried write as the bbolt store's does: the record
// as it is now when nothing wrote the key since, else what the first
// attempt wrote, without its value.
func (s *Store) replayPut(ctx context.Context, tenant string, kind store.Kind, key string, first store.Record) (store.Record, error) {
	var cur store.Record
	err := s.pool.QueryRow(ctx, sqlGet, s.args(tenant, kind, key)).Scan(&cur.Value, &cur.Meta, &cur.Created, &cur.Updated, &cur.Revision)
	if errors.Is(err, pgx.ErrNoRows) {
		return first, nil
	}
	if err != nil {
		return store.Record{}, err
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
func (s *Store) findOutcome(ctx context.Context, id []byte, op byte, tenant string, kind store.Kind, key string) (store.Outcome, bool, error) {
	var (
		o               store.Outcome
		gotTenant, key2 []byte
		gotKind         string
		gotOp           int16
		valueLen        int
	)
	err := s.pool.QueryRow(ctx, sqlOutcome, pgx.NamedArgs{"id": id}).Scan(&gotOp, &gotTenant, &gotKind, &key2,
		&o.Deleted, &o.Record.Revision, &o.Record.Created, &o.Record.Updated, &valueLen)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Outcome{}, false, nil
	}
	if err != nil {
		return store.Outcome{}, false, err
	}
	if byte(gotOp) != op || string(gotTenant) != tenant || store.Kind(gotKind) != kind || string(key2) != key {
		return store.Outcome{}, false, fmt.Errorf("%w: request ID %x was already used for another write", store.ErrInvalid, id)
	}
	o.Op, o.Tenant, o.Kind, o.Key = op, tenant, kind, key
	o.Record.Key, o.Record.ValueLen = key, valueLen
	o.Record.Created, o.Record.Updated = o.Record.Created.UTC(), o.Record.Updated.UTC()
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
func (s *Store) Delete(ctx context.Context, tenant string, kind store.Kind, key string, requestID []byte) (bool, error) {
	id, fresh, err := s.startWrite(ctx, requestID)
	if err != nil {
		return false, err
	}
	var deleted bool
	err = s.retry(ctx, func(ctx context.Context, attempt int) error {
		if !fresh || attempt > 1 {
			o, ok, err := s.findOutcome(ctx, id, store.OutcomeDelete, tenant, kind, key)
			if err != nil || ok {
				deleted = o.Deleted
				return err
			}
		}
		a := s.args(tenant, kind, key)
		a["id"] = id
		return s.pool.QueryRow(ctx, sqlDelete, a).Scan(&deleted)
	})
	return deleted, err
}
