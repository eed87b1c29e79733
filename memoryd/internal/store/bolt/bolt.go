// Package bolt is the store.Store of one bbolt file: memoryd's embedded
// default, and the format of every backup.
package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/codeexec/codeexec/memoryd/internal/store"
)

// Bucket layout: tenants/<tenant>/<kind>/<key> → encoded Record. Keys and
// tenant names are bucket keys byte for byte, so nothing is ever rewritten
// and distinct keys stay distinct.
var (
	bucketTenants = []byte("tenants")
	bucketMeta    = []byte("meta")
	keySchema     = []byte("schema")
	schemaVersion = []byte("1")
)

// Options tune Open.
type Options struct {
	// LockTimeout bounds the wait for the file lock. Keep it short: a held
	// lock means another process owns the file, and waiting does not help.
	LockTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnCommit, when set, is called after every group commit with the
	// number of writes it carried and how long it took.
	OnCommit func(writes int, d time.Duration)
}

// Store is a store.Store on one bbolt file. Writes go through a group commit;
// NoSync stays false, so every acknowledged write has been fsynced.
type Store struct {
	db     *bbolt.DB
	commit *committer
	now    func() time.Time
	// lastSweep is when expired request outcomes were last swept (Unix
	// nanoseconds).
	lastSweep atomic.Int64
	// created is set when Open found no schema: the database is new.
	created bool
}

var _ store.Store = (*Store)(nil)

// Open opens or creates the database at path with mode 0600, creating
// its directory with mode 0700. A file locked by another process fails
// after opts.LockTimeout with a message that says so.
func Open(path string, opts Options) (*Store, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = 250 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create directory for database %s: %w", path, err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{
		Timeout:        opts.LockTimeout,
		FreelistType:   bbolt.FreelistMapType,
		NoFreelistSync: true,
		// Room to grow without remapping, since a remap waits for every
		// reader, including a running backup.
		InitialMmapSize: 64 << 20,
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, lockedError{path}
	}
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// bbolt applies the mode only when it creates the file; an existing
	// file made by hand or by an older version is tightened here.
	if err := os.Chmod(path, 0o600); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("set permissions of database %s: %w", path, err)
	}
	created := false
	err = db.Update(func(tx *bbolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketTenants); err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		v := meta.Get(keySchema)
		if v != nil && !bytes.Equal(v, schemaVersion) {
			return fmt.Errorf("schema version %q is not supported (this memoryd reads %q)", v, schemaVersion)
		}
		created = v == nil
		return meta.Put(keySchema, schemaVersion)
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("initialise database %s: %w", path, err)
	}
	return &Store{db: db, commit: newCommitter(db, opts.OnCommit), now: opts.Now, created: created}, nil
}

// lockedError is ErrLocked with the file's name.
type lockedError struct{ path string }

func (e lockedError) Error() string {
	return fmt.Sprintf("database %s is locked by another process (is another memoryd or codeexec running?)", e.path)
}

func (e lockedError) Is(target error) bool { return target == store.ErrLocked }

// Path returns the database file's path.
func (s *Store) Path() string { return s.db.Path() }

// Created reports whether this Open created the database, so that a
// first start can fill it (an upstream user's state, say). A file that an
// earlier open initialised, even if empty, does not count.
func (s *Store) Created() bool { return s.created }

// kindBucket finds tenants/<tenant>/<kind>, or nil when it does not exist.
func kindBucket(tx *bbolt.Tx, tenant string, kind store.Kind) *bbolt.Bucket {
	t := tx.Bucket(bucketTenants).Bucket([]byte(tenant))
	if t == nil {
		return nil
	}
	return t.Bucket([]byte(kind))
}

// storedValue returns key's encoded record, or nil when the tenant, the
// kind or the key does not exist.
func storedValue(tx *bbolt.Tx, tenant string, kind store.Kind, key string) []byte {
	if b := kindBucket(tx, tenant, kind); b != nil {
		return b.Get([]byte(key))
	}
	return nil
}

// Get implements Store.
func (s *Store) Get(ctx context.Context, tenant string, kind store.Kind, key string) (store.Record, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, err
	}
	var rec store.Record
	err := s.db.View(func(tx *bbolt.Tx) error {
		v := storedValue(tx, tenant, kind, key)
		if v == nil {
			return store.ErrNotFound
		}
		var err error
		rec, err = decode(key, v, true)
		return err
	})
	return rec, closed(err)
}

// closed turns bbolt's "database not open" into ErrClosed.
func closed(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return store.ErrClosed
	}
	return err
}

// Put implements Store.
func (s *Store) Put(ctx context.Context, tenant string, kind store.Kind, key string, w store.Write) (store.Record, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, err
	}
	if err := store.CheckRequestID(w.RequestID); err != nil {
		return store.Record{}, err
	}
	if w.CheckRevision {
		// A stale revision fails here, on a cheap read, rather than in
		// the commit path, where it would cost a transaction. Under
		// contention most compare-and-swaps are stale. The check is
		// repeated inside the transaction, which is what makes it safe.
		if err := s.checkRevision(tenant, kind, key, w.Revision, w.RequestID); err != nil {
			return store.Record{}, err
		}
	}
	var rec store.Record
	err := s.commit.do(func(tx *bbolt.Tx) error {
		rec = store.Record{}
		if o, ok, err := findOutcome(tx, w.RequestID, store.OutcomePut, tenant, kind, key); err != nil || ok {
			rec = replayPut(tx, tenant, kind, key, o.Record)
			return err
		}
		t, err := tx.Bucket(bucketTenants).CreateBucketIfNotExists([]byte(tenant))
		if err != nil {
			return err
		}
		b, err := t.CreateBucketIfNotExists([]byte(kind))
		if err != nil {
			return err
		}
		now := s.now().UTC()
		next := store.Record{Key: key, Value: w.Value, ValueLen: len(w.Value), Meta: w.Meta, Created: now, Updated: now, Revision: 1}
		if v := b.Get([]byte(key)); v != nil {
			old, err := decode(key, v, false)
			if err != nil {
				return err
			}
			if w.CheckRevision && old.Revision != w.Revision {
				return store.Conflict(key, old.Revision, w.Revision)
			}
			next.Created = old.Created
			next.Revision = old.Revision + 1
			if w.KeepMeta {
				next.Meta = old.Meta
			}
		} else if w.CheckRevision && w.Revision != 0 {
			return store.Conflict(key, 0, w.Revision)
		}
		if !w.Created.IsZero() {
			next.Created = w.Created.UTC()
		}
		if !w.Updated.IsZero() {
			next.Updated = w.Updated.UTC()
		}
		if err := b.Put([]byte(key), encode(next)); err != nil {
			return err
		}
		if err := s.recordOutcome(tx, w.RequestID, store.Outcome{Op: store.OutcomePut, Tenant: tenant, Kind: kind, Key: key, Record: next}); err != nil {
			return err
		}
		rec = next
		return nil
	})
	return rec, err
}

// replayPut answers a retried write: the record as it is now when nothing
// wrote the key since, else what the first attempt wrote, without its value.
func replayPut(tx *bbolt.Tx, tenant string, kind store.Kind, key string, first store.Record) store.Record {
	if v := storedValue(tx, tenant, kind, key); v != nil {
		if cur, err := decode(key, v, true); err == nil && cur.Revision == first.Revision {
			return cur
		}
	}
	return first
}

// checkRevision fails with ErrConflict when key's current revision (0 for
// absent) is not want, unless requestID was already committed: then the
// write is a retry whose first attempt moved the revision on, and the
// transaction answers it.
func (s *Store) checkRevision(tenant string, kind store.Kind, key string, want uint64, requestID []byte) error {
	var have uint64
	err := s.db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket(bucketRequests); len(requestID) > 0 && b != nil && b.Get(requestID) != nil {
			have = want
			return nil
		}
		v := storedValue(tx, tenant, kind, key)
		if v == nil {
			return nil
		}
		rec, err := decode(key, v, false)
		have = rec.Revision
		return err
	})
	if err != nil {
		return closed(err)
	}
	if have != want {
		return store.Conflict(key, have, want)
	}
	return nil
}

// Delete implements Store.
func (s *Store) Delete(ctx context.Context, tenant string, kind store.Kind, key string, requestID []byte) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := store.CheckRequestID(requestID); err != nil {
		return false, err
	}
	// A read first keeps deletes of missing keys off the commit path. A
	// retried delete goes to the transaction, which knows whether its
	// first attempt deleted something.
	if len(requestID) == 0 {
		if _, err := s.Get(ctx, tenant, kind, key); errors.Is(err, store.ErrNotFound) {
			return false, nil
		} else if err != nil {
			return false, err
		}
	}
	var deleted bool
	err := s.commit.do(func(tx *bbolt.Tx) error {
		deleted = false
		if o, ok, err := findOutcome(tx, requestID, store.OutcomeDelete, tenant, kind, key); err != nil || ok {
			deleted = o.Deleted
			return err
		}
		b := kindBucket(tx, tenant, kind)
		if b != nil && b.Get([]byte(key)) != nil {
			deleted = true
			if err := b.Delete([]byte(key)); err != nil {
				return err
			}
		}
		return s.recordOutcome(tx, requestID, store.Outcome{Op: store.OutcomeDelete, Tenant: tenant, Kind: kind, Key: key, Deleted: deleted})
	})
	return deleted, err
}

// List implements Store.
func (s *Store) List(ctx context.Context, tenant string, kind store.Kind, withValues bool) ([]store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []store.Record
	err := s.db.View(func(tx *bbolt.Tx) error {
		b := kindBucket(tx, tenant, kind)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			rec, err := decode(string(k), v, withValues)
			if err != nil {
				return err
			}
			out = append(out, rec)
			return nil
		})
	})
	return out, closed(err)
}

// Tenants implements Store.
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []string
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketTenants).ForEach(func(k, _ []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	return out, closed(err)
}

// Backup implements Store with bbolt's Tx.WriteTo: a read transaction sees
// one committed state, and writers keep committing while it runs.
func (s *Store) Backup(ctx context.Context, w io.Writer) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var n int64
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		n, err = tx.WriteTo(writerFunc(func(p []byte) (int, error) {
			// Stop a long copy when the caller goes away.
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			return w.Write(p)
		}))
		return err
	})
	return n, closed(err)
}

// Close implements Store: it lets the commit in progress finish, then
// closes the file and releases the lock.
func (s *Store) Close() error {
	s.commit.close()
	return s.db.Close()
}

// writerFunc adapts a function to io.Writer.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// CommitStats reports how many transactions the group commit ran and how
// many writes they carried; writes/commits is the mean group size.
func (s *Store) CommitStats() (commits, writes uint64) {
	return s.commit.commits.Load(), s.commit.writes.Load()
}
