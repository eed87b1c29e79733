package bolt

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bbolt "go.etcd.io/bbolt"

	"github.com/codeexec/codeexec/memoryd/internal/store"
)

func open(t *testing.T, now func() time.Time) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "m.db"), Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestCodecRoundTrip(t *testing.T) {
	t.Parallel()
	for _, r := range []store.Record{
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

func TestCreatedOnlyOnFirstOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	for i, want := range []bool{true, false} {
		s, err := Open(path, Options{})
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
		return func(tx *bbolt.Tx) error {
			b, err := tx.Bucket(bucketTenants).CreateBucketIfNotExists([]byte(key))
			if err != nil {
				return err
			}
			return b.Put([]byte("x"), []byte("y"))
		}
	}
	group := []pending{
		{fn: put("a"), done: make(chan error, 1)},
		{fn: func(*bbolt.Tx) error { return boom }, done: make(chan error, 1)},
		{fn: func(*bbolt.Tx) error { return store.ErrConflict }, done: make(chan error, 1)},
		{fn: put("b"), done: make(chan error, 1)},
	}
	s.commit.commit(group)
	want := []error{nil, boom, store.ErrConflict, nil}
	for i, p := range group {
		if err := <-p.done; !errors.Is(err, want[i]) {
			t.Errorf("write %d: %v, want %v", i, err, want[i])
		}
	}
	err := s.db.View(func(tx *bbolt.Tx) error {
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
