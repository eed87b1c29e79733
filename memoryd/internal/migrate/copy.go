// Package migrate moves memoryd's records where memoryd's handlers do not:
// from one store to another (Copy, for a move from bbolt to PostgreSQL or
// back), from a running memoryd to a backup file (BackupToFile), and from
// the upstream project's state dir into a running memoryd
// (ImportUpstream). The public memoryd package exports each of them.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/codeexec/codeexec/memoryd/internal/shared"
	"github.com/codeexec/codeexec/memoryd/internal/store"
	"github.com/codeexec/codeexec/memoryd/internal/store/bolt"
	"github.com/codeexec/codeexec/memoryd/internal/store/postgres"
)

// CopyOptions configure Copy.
type CopyOptions struct {
	// From and To are each a bbolt file's path or a PostgreSQL URL
	// (postgres://…).
	From, To string
	// PasswordFile holds the password of whichever side is PostgreSQL.
	// Two databases with different passwords take a PGPASSFILE instead.
	PasswordFile string
	// Replace overwrites keys that the destination holds with another
	// record. Without it they are left alone and reported.
	Replace bool
	// Wait bounds the wait for an unreachable database; 0 is
	// 30s (memoryd.DefaultStoreWait).
	Wait time.Duration
	// Version is this codeexec's version.
	Version string
	// Logger receives the stores' messages.
	Logger *slog.Logger
}

// CopyReport says what Copy did.
type CopyReport struct {
	// Kinds counts the records of each kind (memory, tools, …).
	Kinds map[string]*CopyCount
	// Differs names the records that the destination held with another
	// content: tenant, kind and key.
	Differs []string
	// Replace is CopyOptions.Replace, for String.
	Replace bool
}

// CopyCount is what became of the records of one kind.
type CopyCount struct {
	// Added were absent and are now copied.
	Added int
	// Unchanged were already there, the same: a copy run again.
	Unchanged int
	// Differs were there with another content and were left alone.
	Differs int
	// Replaced were there with another content and were overwritten.
	Replaced int
}

// maxDiffersShown bounds the keys String lists.
const maxDiffersShown = 20

// String renders the report for a terminal.
func (r CopyReport) String() string {
	var b strings.Builder
	kinds := make([]string, 0, len(r.Kinds))
	for k := range r.Kinds {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	fmt.Fprintf(&b, "copied %d records\n", r.total())
	for _, k := range kinds {
		c := r.Kinds[k]
		fmt.Fprintf(&b, "  %s: %d added, %d already there, %d differ", k, c.Added, c.Unchanged, c.Differs+c.Replaced)
		if c.Replaced > 0 {
			fmt.Fprintf(&b, " (replaced)")
		} else if c.Differs > 0 {
			fmt.Fprintf(&b, " (left alone)")
		}
		b.WriteByte('\n')
	}
	for i, d := range r.Differs {
		if i == maxDiffersShown {
			fmt.Fprintf(&b, "  … and %d more\n", len(r.Differs)-i)
			break
		}
		fmt.Fprintf(&b, "  differs: %s\n", d)
	}
	if len(r.Differs) > 0 && !r.Replace {
		b.WriteString("the destination's records were kept; run again with --replace to overwrite them with the source's\n")
	}
	return b.String()
}

// Copy copies every record (memory, saved tools, session checkpoints; all
// tenants) from one store to another, keeping revisions and creation and
// update times. Running it again adds only what is new: records already
// there are counted, not written. A bbolt source may be in use by running
// codeexec processes: Copy reads a consistent snapshot through them. A
// bbolt destination must not be in use.
func Copy(ctx context.Context, opts CopyOptions) (CopyReport, error) {
	rep := CopyReport{Kinds: map[string]*CopyCount{}, Replace: opts.Replace}
	if opts.Wait <= 0 {
		opts.Wait = postgres.DefaultWait
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.From == "" || opts.To == "" {
		return rep, errors.New("copy: name both the source and the destination: a bbolt file or a postgres:// URL each")
	}
	if opts.From == opts.To {
		return rep, errors.New("copy: the source and the destination are the same")
	}
	// Both files are checked before either is opened, so that a
	// mistyped one fails having created nothing.
	if err := checkFiles(opts.From, opts.To); err != nil {
		return rep, err
	}
	from, closeFrom, err := openSource(ctx, opts)
	if err != nil {
		return rep, err
	}
	defer closeFrom()
	to, closeTo, err := openDestination(ctx, opts)
	if err != nil {
		return rep, err
	}
	defer closeTo()
	err = store.Copy(ctx, from, to, opts.Replace, func(e store.Entry, r store.ImportResult) {
		c := rep.Kinds[string(e.Kind)]
		if c == nil {
			c = &CopyCount{}
			rep.Kinds[string(e.Kind)] = c
		}
		switch r {
		case store.Added:
			c.Added++
		case store.Unchanged:
			c.Unchanged++
		case store.Differs, store.Replaced:
			if r == store.Differs {
				c.Differs++
			} else {
				c.Replaced++
			}
			rep.Differs = append(rep.Differs, fmt.Sprintf("tenant %q, %s %q (revision %d in the source)", e.Tenant, e.Kind, e.Record.Key, e.Record.Revision))
		}
	})
	if n := rep.total(); err != nil && n > 0 {
		// Records already there are skipped by the next run.
		err = fmt.Errorf("%w; the copy stopped after %d records: run it again to copy the rest", err, n)
	}
	return rep, err
}

// total is the number of records the copy went through.
func (r CopyReport) total() int {
	n := 0
	for _, c := range r.Kinds {
		n += c.Added + c.Unchanged + c.Differs + c.Replaced
	}
	return n
}

// checkFiles checks the bbolt sides of a copy: from must exist, and to
// may be a new file, in a directory that exists (none is created), but
// not from under another name.
func checkFiles(from, to string) error {
	var fromInfo os.FileInfo
	if !isPostgres(from) {
		fi, err := os.Stat(from)
		if err != nil || !fi.Mode().IsRegular() {
			why := "no such file"
			switch {
			case err == nil:
				why = "not a regular file"
			case !errors.Is(err, fs.ErrNotExist):
				why = err.Error()
			default:
				if _, derr := os.Stat(filepath.Dir(from)); derr != nil {
					why = fmt.Sprintf("the directory %s does not exist", filepath.Dir(from))
				}
			}
			return fmt.Errorf("copy: no bbolt database at %s (%s): --from takes an existing bbolt file or a postgres:// URL", from, why)
		}
		fromInfo = fi
	}
	if isPostgres(to) {
		return nil
	}
	if fi, err := os.Stat(filepath.Dir(to)); err != nil || !fi.IsDir() {
		return fmt.Errorf("copy: cannot create %s: the directory %s does not exist; create it first (copy creates no directory), or name a bbolt file in a directory that exists", to, filepath.Dir(to))
	}
	fi, err := os.Stat(to)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("copy: %s is not a regular file: --to takes a bbolt file (new, or one no process holds) or a postgres:// URL", to)
	case err == nil && fromInfo != nil && os.SameFile(fi, fromInfo):
		return fmt.Errorf("copy: %s and %s are the same file; name another destination", from, to)
	}
	return nil
}

func isPostgres(loc string) bool {
	return strings.HasPrefix(loc, "postgres://") || strings.HasPrefix(loc, "postgresql://")
}

// openPostgres opens the database at url as one side of the copy, which
// side names ("from" or "to") in the error.
func openPostgres(ctx context.Context, url, side string, opts CopyOptions) (store.Transfer, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Wait)
	defer cancel()
	pg, err := postgres.Open(ctx, url, postgres.Options{PasswordFile: opts.PasswordFile, Wait: opts.Wait, Version: opts.Version, Logger: opts.Logger})
	if err != nil {
		return nil, nil, fmt.Errorf("copy %s PostgreSQL: %w", side, err)
	}
	return pg, func() { _ = pg.Close() }, nil
}

// openSource opens the store to copy from. A bbolt file is first copied
// to a snapshot beside it, through the process that holds it if any, so
// that the copy neither stops running codeexec processes nor sees half a
// write.
func openSource(ctx context.Context, opts CopyOptions) (store.Transfer, func(), error) {
	if isPostgres(opts.From) {
		return openPostgres(ctx, opts.From, "from", opts)
	}
	sh, err := shared.Open(shared.Options{Path: opts.From, Version: opts.Version, Logger: opts.Logger})
	if err != nil {
		return nil, nil, fmt.Errorf("copy from %s: %w", opts.From, err)
	}
	snap, err := os.CreateTemp(filepath.Dir(opts.From), "."+filepath.Base(opts.From)+".copy-*")
	if err != nil {
		_ = sh.Close()
		return nil, nil, fmt.Errorf("copy: snapshot of %s: %w", opts.From, err)
	}
	remove := func() { _ = snap.Close(); _ = os.Remove(snap.Name()) }
	_, err = sh.Backup(ctx, snap)
	_ = sh.Close()
	if err == nil {
		err = snap.Close()
	}
	if err != nil {
		remove()
		return nil, nil, fmt.Errorf("copy: snapshot of %s: %w", opts.From, err)
	}
	b, err := bolt.Open(snap.Name(), bolt.Options{})
	if err != nil {
		remove()
		return nil, nil, err
	}
	return b, func() { _ = b.Close(); remove() }, nil
}

// openDestination opens the store to copy into.
func openDestination(ctx context.Context, opts CopyOptions) (store.Transfer, func(), error) {
	if isPostgres(opts.To) {
		return openPostgres(ctx, opts.To, "to", opts)
	}
	b, err := bolt.Open(opts.To, bolt.Options{})
	if errors.Is(err, store.ErrLocked) {
		return nil, nil, fmt.Errorf("copy: %s is in use by a running codeexec; stop it first, or copy into another file", opts.To)
	}
	if err != nil {
		return nil, nil, err
	}
	return b, func() { _ = b.Close() }, nil
}
