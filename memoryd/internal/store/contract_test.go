package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/codeexec/codeexec/services/pgtest"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	"github.com/codeexec/codeexec/memoryd/internal/store/bolt"
	"github.com/codeexec/codeexec/memoryd/internal/store/postgres"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openBolt opens a store on a new file in the test's temp dir.
func openBolt(t testing.TB, now func() time.Time) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(filepath.Join(t.TempDir(), "m.db"), bolt.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openPostgres opens a store on a new database of the test binary's
// PostgreSQL server.
func openPostgres(t testing.TB, now func() time.Time) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), pgtest.NewDatabase(t), postgres.Options{Now: now, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// opener opens an empty store with the given clock (nil: the store's own).
type opener func(t *testing.T, now func() time.Time) store.Store

// eachStore runs a test of the Store contract against every store, so
// that bbolt and PostgreSQL answer the same table of tests.
func eachStore(t *testing.T, test func(t *testing.T, open opener)) {
	t.Helper()
	stores := []struct {
		name string
		open opener
	}{
		{"bolt", func(t *testing.T, now func() time.Time) store.Store { return openBolt(t, now) }},
		{"postgres", func(t *testing.T, now func() time.Time) store.Store { return openPostgres(t, now) }},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			test(t, st.open)
		})
	}
}

func TestPut(t *testing.T) {
	t.Parallel()
	eachStore(t, testPut)
}

func testPut(t *testing.T, open opener) {
	clock := time.Unix(1000, 0)
	s := open(t, func() time.Time { clock = clock.Add(time.Second); return clock })
	ctx := t.Context()
	tests := []struct {
		name    string
		w       store.Write
		wantErr error
		want    store.Record // Key, Value, Meta, Revision, Created, Updated
	}{
		{"create", store.Write{Value: []byte("1"), Meta: []byte("m1")}, nil,
			store.Record{Value: []byte("1"), Meta: []byte("m1"), Revision: 1, Created: time.Unix(1001, 0), Updated: time.Unix(1001, 0)}},
		{"overwrite keeps created, replaces meta", store.Write{Value: []byte("2"), Meta: []byte("m2")}, nil,
			store.Record{Value: []byte("2"), Meta: []byte("m2"), Revision: 2, Created: time.Unix(1001, 0), Updated: time.Unix(1002, 0)}},
		{"cas ok keeps meta", store.Write{Value: []byte("3"), Meta: []byte("ignored"), KeepMeta: true, CheckRevision: true, Revision: 2}, nil,
			store.Record{Value: []byte("3"), Meta: []byte("m2"), Revision: 3, Created: time.Unix(1001, 0), Updated: time.Unix(1003, 0)}},
		{"cas stale", store.Write{Value: []byte("4"), CheckRevision: true, Revision: 2}, store.ErrConflict, store.Record{}},
		{"cas expects absent", store.Write{Value: []byte("4"), CheckRevision: true, Revision: 0}, store.ErrConflict, store.Record{}},
		// Microseconds: PostgreSQL's timestamps keep no finer.
		{"given times replace both", store.Write{Value: []byte("5"), Meta: []byte("m5"), Created: time.Unix(7, 5000), Updated: time.Unix(9, 0)}, nil,
			store.Record{Value: []byte("5"), Meta: []byte("m5"), Revision: 4, Created: time.Unix(7, 5000), Updated: time.Unix(9, 0)}},
		// Updated: the zero time stands for "the clock's time of this
		// write" (stores read the clock a different number of times).
		{"a later plain write keeps the given create time", store.Write{Value: []byte("6"), Meta: []byte("m6")}, nil,
			store.Record{Value: []byte("6"), Meta: []byte("m6"), Revision: 5, Created: time.Unix(7, 5000)}},
	}
	for _, tc := range tests {
		got, err := s.Put(ctx, "t", store.KindMemory, "k", tc.w)
		if !errors.Is(err, tc.wantErr) {
			t.Fatalf("%s: err = %v, want %v", tc.name, err, tc.wantErr)
		}
		if err != nil {
			continue
		}
		tc.want.Key, tc.want.ValueLen = "k", len(tc.want.Value)
		if tc.want.Updated.IsZero() {
			tc.want.Updated = clock
		}
		tc.want.Created, tc.want.Updated = tc.want.Created.UTC(), tc.want.Updated.UTC()
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: Put (-want +got):\n%s", tc.name, diff)
		}
		stored, err := s.Get(ctx, "t", store.KindMemory, "k")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(got, stored); diff != "" {
			t.Errorf("%s: Get differs from Put (-put +get):\n%s", tc.name, diff)
		}
	}
	// Kinds and tenants are separate namespaces.
	for _, c := range []struct {
		tenant string
		kind   store.Kind
	}{{"t", store.KindTool}, {"u", store.KindMemory}} {
		if _, err := s.Get(ctx, c.tenant, c.kind, "k"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%s, %s) = %v, want ErrNotFound", c.tenant, c.kind, err)
		}
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	eachStore(t, testClosed)
}

func testClosed(t *testing.T, open opener) {
	s := open(t, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := s.Put(ctx, "t", store.KindMemory, "k", store.Write{}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}
	if _, err := s.Get(ctx, "t", store.KindMemory, "k"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if _, err := s.List(ctx, "t", store.KindMemory, false); !errors.Is(err, store.ErrClosed) {
		t.Errorf("List after Close: %v", err)
	}
	if _, err := s.Backup(ctx, &bytes.Buffer{}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Backup after Close: %v", err)
	}
	if _, err := s.Delete(ctx, "t", store.KindMemory, "k", nil); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Delete after Close: %v", err)
	}
}

// A write sent twice with one request ID is applied once, and the retry
// answers as the first attempt did: a compare-and-swap succeeds instead of
// failing on its own first write, and a delete still says it deleted.
func TestRetriedWritesApplyOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, testRetriedWritesApplyOnce)
}

func testRetriedWritesApplyOnce(t *testing.T, open opener) {
	b := open(t, nil)
	ctx := t.Context()
	id := store.NewRequestID(time.Now())
	w := store.Write{Value: []byte("1"), CheckRevision: true, Revision: 0, RequestID: id}
	first, err := b.Put(ctx, "t", store.KindMemory, "n", w)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.Put(ctx, "t", store.KindMemory, "n", w)
	if err != nil {
		t.Fatalf("retried compare-and-swap: %v", err)
	}
	if again.Revision != first.Revision || string(again.Value) != "1" {
		t.Errorf("retry answered %+v, want %+v", again, first)
	}
	cur, _ := b.Get(ctx, "t", store.KindMemory, "n")
	if cur.Revision != 1 {
		t.Errorf("revision after a retried write: %d, want 1", cur.Revision)
	}
	// Another write since: the retry still succeeds, with the first
	// attempt's revision, and does not undo the later write.
	if _, err := b.Put(ctx, "t", store.KindMemory, "n", store.Write{Value: []byte("5")}); err != nil {
		t.Fatal(err)
	}
	if late, err := b.Put(ctx, "t", store.KindMemory, "n", w); err != nil || late.Revision != 1 {
		t.Errorf("late retry: %+v, %v", late, err)
	}
	if got, _ := b.Get(ctx, "t", store.KindMemory, "n"); string(got.Value) != "5" {
		t.Errorf("a late retry overwrote a later write: %s", got.Value)
	}
	// The same ID for another key is refused.
	if _, err := b.Put(ctx, "t", store.KindMemory, "other", w); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("request ID reused for another key: %v", err)
	}
	del := store.NewRequestID(time.Now())
	for i := range 2 {
		deleted, err := b.Delete(ctx, "t", store.KindMemory, "n", del)
		if err != nil || !deleted {
			t.Errorf("delete attempt %d: %v, %v; want true both times", i, deleted, err)
		}
	}
	if _, err := b.Put(ctx, "t", store.KindMemory, "n", store.Write{Value: []byte("1"), RequestID: []byte("short")}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a 5-byte request ID: %v", err)
	}
}

// Records move between the stores with their revisions and times, and a
// copy run again changes nothing; a key that differs is left alone
// unless replace is set.
func TestCopyBetweenStores(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	src := openBolt(t, func() time.Time { clock = clock.Add(time.Second); return clock })
	ctx := t.Context()
	for i, k := range []string{"a", "b", "a\x00b", "ключ"} {
		for range i + 1 {
			if _, err := src.Put(ctx, "alice", store.KindMemory, k, store.Write{Value: []byte(fmt.Sprint(i)), Meta: []byte(`{"m":1}`)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := src.Put(ctx, "bob", store.KindTool, "f", store.Write{Value: []byte("def f(): pass"), Meta: []byte("doc")}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Put(ctx, "bob", "checkpoints", "s1", store.Write{Value: []byte{0, 1, 2}}); err != nil {
		t.Fatal(err)
	}
	pg := openPostgres(t, nil)
	count := func(from, to store.Transfer, replace bool) map[store.ImportResult]int {
		t.Helper()
		got := map[store.ImportResult]int{}
		if err := store.Copy(ctx, from, to, replace, func(_ store.Entry, r store.ImportResult) { got[r]++ }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := count(src, pg, false); got[store.Added] != 6 || len(got) != 1 {
		t.Fatalf("first copy: %v, want 6 added", got)
	}
	if got := count(src, pg, false); got[store.Unchanged] != 6 || len(got) != 1 {
		t.Fatalf("copy run again: %v, want 6 unchanged", got)
	}
	for _, c := range []struct {
		tenant string
		kind   store.Kind
		key    string
	}{{"alice", store.KindMemory, "a\x00b"}, {"bob", store.KindTool, "f"}, {"bob", "checkpoints", "s1"}} {
		want, _ := src.Get(ctx, c.tenant, c.kind, c.key)
		got, err := pg.Get(ctx, c.tenant, c.kind, c.key)
		if err != nil {
			t.Fatal(err)
		}
		want.Created, want.Updated = want.Created.Truncate(time.Microsecond), want.Updated.Truncate(time.Microsecond)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s/%s/%q after the copy (-bolt +postgres):\n%s", c.tenant, c.kind, c.key, diff)
		}
	}
	// The key goes on in PostgreSQL: the next copy leaves it alone.
	if _, err := pg.Put(ctx, "alice", store.KindMemory, "a", store.Write{Value: []byte(`"newer"`)}); err != nil {
		t.Fatal(err)
	}
	if got := count(src, pg, false); got[store.Differs] != 1 || got[store.Unchanged] != 5 {
		t.Fatalf("copy over a changed key: %v, want 1 differs and 5 unchanged", got)
	}
	if got, _ := pg.Get(ctx, "alice", store.KindMemory, "a"); string(got.Value) != `"newer"` {
		t.Errorf("a copy without replace overwrote %q", got.Value)
	}
	if got := count(src, pg, true); got[store.Replaced] != 1 {
		t.Fatalf("copy with replace: %v, want 1 replaced", got)
	}
	// And back: PostgreSQL into a new bbolt file.
	back := openBolt(t, nil)
	if got := count(pg, back, false); got[store.Added] != 6 {
		t.Fatalf("copy back: %v", got)
	}
	rec, err := back.Get(ctx, "alice", store.KindMemory, "ключ")
	if err != nil || rec.Revision != 4 {
		t.Errorf("copied back: %+v, %v; want revision 4", rec, err)
	}
}
