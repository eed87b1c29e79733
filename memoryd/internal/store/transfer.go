package store

import (
	"bytes"
	"context"
	"fmt"
	"time"
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

// Same reports whether two records are the same write. Times are
// compared to the microsecond, which is what PostgreSQL keeps of bbolt's
// nanoseconds.
func Same(a, b Record) bool {
	return a.Revision == b.Revision && bytes.Equal(a.Value, b.Value) && bytes.Equal(a.Meta, b.Meta) &&
		a.Created.Truncate(time.Microsecond).Equal(b.Created.Truncate(time.Microsecond)) &&
		a.Updated.Truncate(time.Microsecond).Equal(b.Updated.Truncate(time.Microsecond))
}

// CheckEntry refuses entries that no store could have written.
func CheckEntry(e Entry) error {
	if e.Tenant == "" || e.Record.Key == "" || e.Kind == "" || e.Record.Revision == 0 || e.Record.Revision > MaxRevision {
		return fmt.Errorf("%w: record %q of tenant %q (kind %q, revision %d) cannot be imported", ErrInvalid, e.Record.Key, e.Tenant, e.Kind, e.Record.Revision)
	}
	return nil
}

// copyBatch is how many records Copy imports per transaction.
const copyBatch = 1024

// Copy walks from and imports every record into to, in batches, and
// calls report (when not nil) with each entry and what became of it.
func Copy(ctx context.Context, from, to Transfer, replace bool, report func(Entry, ImportResult)) error {
	batch := make([]Entry, 0, copyBatch)
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
