package shared

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	"github.com/codeexec/codeexec/memoryd/internal/store/bolt"
	sharedstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sharedstore/v1"
	"github.com/codeexec/codeexec/services/grpctest"
	"github.com/codeexec/codeexec/services/usersock"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func openShared(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(Options{Path: path, Version: "test", Logger: testLogger(t), Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func put(t *testing.T, s store.Store, key, value string) store.Record {
	t.Helper()
	rec, err := s.Put(t.Context(), "t", store.KindMemory, key, store.Write{Value: []byte(value), Meta: []byte("{}")})
	if err != nil {
		t.Fatalf("Put(%s): %v", key, err)
	}
	return rec
}

func get(t *testing.T, s store.Store, key string) string {
	t.Helper()
	rec, err := s.Get(t.Context(), "t", store.KindMemory, key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return string(rec.Value)
}

// Two stores on one file: the first owns it, the second uses it through
// the socket, and each sees the other's writes, errors included.
func TestSecondOpenUsesTheOwner(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	a := openShared(t, path)
	b := openShared(t, path)
	if !a.Owner() || b.Owner() {
		t.Fatalf("owner: a=%v b=%v; want only a", a.Owner(), b.Owner())
	}
	put(t, b, "k", `"from b"`)
	if got := get(t, a, "k"); got != `"from b"` {
		t.Errorf("a reads %s", got)
	}
	put(t, a, "k2", `2`)
	if got := get(t, b, "k2"); got != `2` {
		t.Errorf("b reads %s", got)
	}
	// The store's sentinels survive the socket, messages included.
	if _, err := b.Get(t.Context(), "t", store.KindMemory, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing key through the socket: %v, want ErrNotFound", err)
	}
	_, err := b.Put(t.Context(), "t", store.KindMemory, "k", store.Write{Value: []byte("3"), CheckRevision: true, Revision: 7})
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), `"k" is at revision 1, not 7`) {
		t.Errorf("stale compare-and-swap through the socket: %v", err)
	}
	recs, err := b.List(t.Context(), "t", store.KindMemory, true)
	if err != nil || len(recs) != 2 || string(recs[1].Value) != "2" {
		t.Errorf("List through the socket: %+v, %v", recs, err)
	}
	if deleted, err := b.Delete(t.Context(), "t", store.KindMemory, "k2", nil); err != nil || !deleted {
		t.Errorf("Delete through the socket: %v, %v", deleted, err)
	}
	var buf bytes.Buffer
	if n, err := b.Backup(t.Context(), &buf); err != nil || n == 0 || int64(buf.Len()) != n {
		t.Errorf("Backup through the socket: %d bytes (buffer %d), %v", n, buf.Len(), err)
	}
	// The socket and the owner file are owner-only.
	for _, p := range []string{SocketPath(path), OwnerPath(path)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %o, want 600", p, fi.Mode().Perm())
		}
	}
}

// When the owner closes, the other store takes the file over and its next
// calls work; the socket and owner file are then the new owner's.
func TestTakeoverWhenTheOwnerCloses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	a := openShared(t, path)
	b := openShared(t, path)
	put(t, a, "k", "1")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// The first call after the owner left waits for b's own takeover.
	put(t, b, "k", "2")
	if got := get(t, b, "k"); got != "2" {
		t.Errorf("after takeover: %s", got)
	}
	waitFor(t, b.Owner, "b to own the file")
	if b.Takeovers() != 1 {
		t.Errorf("takeovers = %d, want 1", b.Takeovers())
	}
	info, ok := readOwner(path)
	if !ok || info.PID != os.Getpid() || info.Protocol != Protocol || info.Version != "test" {
		t.Errorf("owner file after takeover: %+v, %v", info, ok)
	}
	// A third store uses b.
	c := openShared(t, path)
	if c.Owner() {
		t.Fatal("c owns a file that b holds")
	}
	if got := get(t, c, "k"); got != "2" {
		t.Errorf("c reads %s", got)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An owner file that names another protocol makes calls fail at once,
// naming both versions.
func TestOwnerOfAnotherProtocol(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	a := openShared(t, path)
	if err := writeOwner(path, ownerInfo{PID: os.Getpid(), Version: "9.9.9", Protocol: "99", Socket: "x"}); err != nil {
		t.Fatal(err)
	}
	_ = a
	b := openShared(t, path)
	begin := time.Now()
	_, err := b.Get(t.Context(), "t", store.KindMemory, "k")
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Get = %v, want ErrUnavailable", err)
	}
	for _, want := range []string{"codeexec 9.9.9", "protocol 99", "this codeexec test speaks protocol " + Protocol} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if d := time.Since(begin); d > time.Second {
		t.Errorf("the call waited %v; an owner that cannot be talked to should fail it at once", d)
	}
}

// A process that holds the file without sharing it (a codeexec from before
// sharing) is named, after a short grace, and calls fail instead of
// waiting; when it lets go, the store takes over.
func TestHolderThatDoesNotShare(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	holder := exec.Command(os.Args[0], "-test.run=^TestHoldLock$")
	holder.Env = append(os.Environ(), "CODEEXEC_TEST_HOLD="+path)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
	if _, err := out.Read(make([]byte, 1)); err != nil { // "locked"
		t.Fatalf("lock holder: %v", err)
	}
	s := openShared(t, path)
	var callErr error
	waitFor(t, func() bool {
		_, callErr = s.Get(t.Context(), "t", store.KindMemory, "k")
		return errors.Is(callErr, store.ErrUnavailable) && strings.Contains(callErr.Error(), "does not share")
	}, "the non-sharing holder to be named")
	if want := fmt.Sprintf("pid %d", holder.Process.Pid); !strings.Contains(callErr.Error(), want) {
		t.Errorf("error %q does not name %s", callErr, want)
	}
	_ = holder.Process.Signal(syscall.SIGKILL)
	_ = holder.Wait()
	waitFor(t, s.Owner, "the store to take the file over")
	put(t, s, "k", "1")
}

// TestHoldLock is the lock holder of TestHolderThatDoesNotShare: it opens
// the file with plain bbolt, as codeexec did before sharing, and waits.
func TestHoldLock(t *testing.T) {
	path := os.Getenv("CODEEXEC_TEST_HOLD")
	if path == "" {
		return // only ever run as TestHolderThatDoesNotShare's child
	}
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fmt.Println("locked") //nolint:forbidigo // the line on stdout is how this child tells its parent it holds the lock
	time.Sleep(time.Minute)
}

// A state dir path too long for a unix socket address still works.
func TestLongSocketPath(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "codeexec.db")
	if len(SocketPath(path)) <= usersock.MaxSunPath {
		t.Fatalf("path %s is not long enough for this test", path)
	}
	a := openShared(t, path)
	b := openShared(t, path)
	put(t, b, "k", "1")
	if got := get(t, a, "k"); got != "1" {
		t.Errorf("a reads %s", got)
	}
	if _, err := os.Stat(SocketPath(path)); err != nil {
		t.Errorf("socket not at its real path: %v", err)
	}
}

// Many writers through the socket, with the owner closing in the middle:
// every acknowledged increment is counted exactly once.
func TestCompareAndSwapAcrossATakeover(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	owner := openShared(t, path)
	followers := []*Store{openShared(t, path), openShared(t, path)}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		acked int
	)
	for _, f := range followers {
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 25 {
					if err := increment(ctx, f); err != nil {
						t.Errorf("increment: %v", err)
						return
					}
					mu.Lock()
					acked++
					mu.Unlock()
				}
			}()
		}
	}
	time.Sleep(50 * time.Millisecond)
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	rec, err := followers[0].Get(ctx, "t", store.KindMemory, "n")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint(acked); string(rec.Value) != want || acked != 400 {
		t.Errorf("counter = %s after %d acknowledged increments (want 400)", rec.Value, acked)
	}
}

// increment is update_memory's loop: read, compare-and-swap, retry on
// conflict.
func increment(ctx context.Context, s store.Store) error {
	for {
		var n int
		rev := uint64(0)
		rec, err := s.Get(ctx, "t", store.KindMemory, "n")
		switch {
		case err == nil:
			_, _ = fmt.Sscan(string(rec.Value), &n)
			rev = rec.Revision
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		_, err = s.Put(ctx, "t", store.KindMemory, "n", store.Write{Value: fmt.Append(nil, n+1), CheckRevision: true, Revision: rev})
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
}

// flakyOwner commits every write, then answers the first attempt of each
// with UNAVAILABLE, as an owner killed between its fsync and its reply.
type flakyOwner struct {
	*server
	mu   sync.Mutex
	seen map[string]bool
}

func (f *flakyOwner) PutRecord(ctx context.Context, req *sharedstorev1.PutRecordRequest) (*sharedstorev1.PutRecordResponse, error) {
	resp, err := f.server.PutRecord(ctx, req)
	f.mu.Lock()
	defer f.mu.Unlock()
	if id := string(req.GetRequestId()); !f.seen[id] {
		f.seen[id] = true
		return nil, status.Error(codes.Unavailable, "owner died after committing")
	}
	return resp, err
}

// The remote store retries a write whose answer was lost with the same
// request ID, so a compare-and-swap that committed is reported as done,
// not as a conflict with itself.
func TestRemoteRetriesALostAnswerOnce(t *testing.T) {
	t.Parallel()
	b, err := bolt.Open(filepath.Join(t.TempDir(), "m.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	conn := grpctest.Start(t, func(g *grpc.Server) {
		sharedstorev1.RegisterStoreServiceServer(g, &flakyOwner{server: &server{st: b, logger: testLogger(t)}, seen: map[string]bool{}})
	})
	r := &Store{opts: Options{Path: filepath.Join(t.TempDir(), "none.db"), Wait: 5 * time.Second, Bolt: bolt.Options{Now: time.Now}}}
	r.cur.Store(&storeBox{&remote{client: sharedstorev1.NewStoreServiceClient(conn)}})
	for i := range 3 {
		rec, err := r.Put(t.Context(), "t", store.KindMemory, "n", store.Write{Value: fmt.Append(nil, i+1), CheckRevision: true, Revision: uint64(i)})
		if err != nil {
			t.Fatalf("increment %d: %v", i, err)
		}
		if rec.Revision != uint64(i+1) {
			t.Errorf("increment %d answered revision %d", i, rec.Revision)
		}
	}
	if got, _ := b.Get(t.Context(), "t", store.KindMemory, "n"); string(got.Value) != "3" || got.Revision != 3 {
		t.Errorf("after three increments whose first answers were lost: %s at revision %d", got.Value, got.Revision)
	}
}
