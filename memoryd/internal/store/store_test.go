package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/codeexec/codeexec/services/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func open(t *testing.T, now func() time.Time) *Bolt {
	t.Helper()
	s, err := OpenBolt(filepath.Join(t.TempDir(), "m.db"), BoltOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openPostgres opens a store on a new database of the test binary's
// PostgreSQL server.
func openPostgres(t testing.TB, now func() time.Time) *Postgres {
	t.Helper()
	s, err := OpenPostgres(t.Context(), pgtest.NewDatabase(t), PostgresOptions{Now: now, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// opener opens an empty store with the given clock (nil: the store's own).
type opener func(t *testing.T, now func() time.Time) Store

// eachStore runs a test of the Store contract against every store, so
// that bbolt and PostgreSQL answer the same table of tests.
func eachStore(t *testing.T, test func(t *testing.T, open opener)) {
	t.Helper()
	stores := []struct {
		name string
		open opener
	}{
		{"bolt", func(t *testing.T, now func() time.Time) Store { return open(t, now) }},
		{"postgres", func(t *testing.T, now func() time.Time) Store { return openPostgres(t, now) }},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			test(t, st.open)
		})
	}
}

func TestCodecRoundTrip(t *testing.T) {
	t.Parallel()
	for _, r := range []Record{
		{Key: "k", Value: []byte(`{"a": 1}`), Meta: []byte("{}"), Created: time.Unix(1, 5).UTC(), Updated: time.Unix(2, 0).UTC(), Revision: 1},
		{Key: "empty", Value: []byte{}, Meta: []byte{}, Created: time.Unix(0, 0).UTC(), Updated: time.Unix(0, 0).UTC(), Revision: 1 << 60},
		{Key: "pre-1970", Value: []byte("x"), Meta: []byte("doc"), Created: time.Unix(-100, 0).UTC(), Updated: time.Unix(-1, 0).UTC(), Revision: 7},
	} {
		r.ValueLen = len(r.Value)
		got, err := decode(r.Key, encode(r), true)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
	for _, bad := range [][]byte{nil, {2}, {codecVersion}, {codecVersion, 1, 2, 2, 200}} {
		if _, err := decode("k", bad, true); !errors.Is(err, errCorrupt) {
			t.Errorf("decode(%v) = %v, want errCorrupt", bad, err)
		}
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
		w       Write
		wantErr error
		want    Record // Key, Value, Meta, Revision, Created, Updated
	}{
		{"create", Write{Value: []byte("1"), Meta: []byte("m1")}, nil,
			Record{Value: []byte("1"), Meta: []byte("m1"), Revision: 1, Created: time.Unix(1001, 0), Updated: time.Unix(1001, 0)}},
		{"overwrite keeps created, replaces meta", Write{Value: []byte("2"), Meta: []byte("m2")}, nil,
			Record{Value: []byte("2"), Meta: []byte("m2"), Revision: 2, Created: time.Unix(1001, 0), Updated: time.Unix(1002, 0)}},
		{"cas ok keeps meta", Write{Value: []byte("3"), Meta: []byte("ignored"), KeepMeta: true, CheckRevision: true, Revision: 2}, nil,
			Record{Value: []byte("3"), Meta: []byte("m2"), Revision: 3, Created: time.Unix(1001, 0), Updated: time.Unix(1003, 0)}},
		{"cas stale", Write{Value: []byte("4"), CheckRevision: true, Revision: 2}, ErrConflict, Record{}},
		{"cas expects absent", Write{Value: []byte("4"), CheckRevision: true, Revision: 0}, ErrConflict, Record{}},
		// Microseconds: PostgreSQL's timestamps keep no finer.
		{"given times replace both", Write{Value: []byte("5"), Meta: []byte("m5"), Created: time.Unix(7, 5000), Updated: time.Unix(9, 0)}, nil,
			Record{Value: []byte("5"), Meta: []byte("m5"), Revision: 4, Created: time.Unix(7, 5000), Updated: time.Unix(9, 0)}},
		// Updated: the zero time stands for "the clock's time of this
		// write" (stores read the clock a different number of times).
		{"a later plain write keeps the given create time", Write{Value: []byte("6"), Meta: []byte("m6")}, nil,
			Record{Value: []byte("6"), Meta: []byte("m6"), Revision: 5, Created: time.Unix(7, 5000)}},
	}
	for _, tc := range tests {
		got, err := s.Put(ctx, "t", KindMemory, "k", tc.w)
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
		stored, err := s.Get(ctx, "t", KindMemory, "k")
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
		kind   Kind
	}{{"t", KindTool}, {"u", KindMemory}} {
		if _, err := s.Get(ctx, c.tenant, c.kind, "k"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%s, %s) = %v, want ErrNotFound", c.tenant, c.kind, err)
		}
	}
}

func TestCreatedOnlyOnFirstOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	for i, want := range []bool{true, false} {
		s, err := OpenBolt(path, BoltOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Created(); got != want {
			t.Errorf("open %d: Created() = %v, want %v", i+1, got, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGroupFallsBackToSolo checks that one write failing with an internal
// error neither fails nor loses the others in its group.
func TestGroupFallsBackToSolo(t *testing.T) {
	t.Parallel()
	s := open(t, nil)
	boom := errors.New("boom")
	put := func(key string) txFunc {
		return func(tx *bolt.Tx) error {
			b, err := tx.Bucket(bucketTenants).CreateBucketIfNotExists([]byte(key))
			if err != nil {
				return err
			}
			return b.Put([]byte("x"), []byte("y"))
		}
	}
	group := []pending{
		{fn: put("a"), done: make(chan error, 1)},
		{fn: func(*bolt.Tx) error { return boom }, done: make(chan error, 1)},
		{fn: func(*bolt.Tx) error { return ErrConflict }, done: make(chan error, 1)},
		{fn: put("b"), done: make(chan error, 1)},
	}
	s.commit.commit(group)
	want := []error{nil, boom, ErrConflict, nil}
	for i, p := range group {
		if err := <-p.done; !errors.Is(err, want[i]) {
			t.Errorf("write %d: %v, want %v", i, err, want[i])
		}
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, k := range []string{"a", "b"} {
			if tx.Bucket(bucketTenants).Bucket([]byte(k)) == nil {
				t.Errorf("write %q was lost", k)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
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
	if _, err := s.Put(ctx, "t", KindMemory, "k", Write{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}
	if _, err := s.Get(ctx, "t", KindMemory, "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if _, err := s.List(ctx, "t", KindMemory, false); !errors.Is(err, ErrClosed) {
		t.Errorf("List after Close: %v", err)
	}
	if _, err := s.Backup(ctx, &bytes.Buffer{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Backup after Close: %v", err)
	}
	if _, err := s.Delete(ctx, "t", KindMemory, "k", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Delete after Close: %v", err)
	}
}
