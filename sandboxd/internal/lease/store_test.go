package lease

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1" //nolint:importas // renamed sessionstorev1 once the durable package split (issue 34) lands
	"github.com/codeexec/codeexec/services/grpctest"
)

// store runs a real memoryd on a bbolt file and returns a client of its
// SessionStoreService.
func store(t *testing.T) memoryv1.SessionStoreServiceClient {
	t.Helper()
	return memoryv1.NewSessionStoreServiceClient(storeConn(t))
}

// storeConn runs a real memoryd on a bbolt file and returns a connection
// to it.
func storeConn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	svc, err := memoryd.New(memoryd.Config{Path: filepath.Join(t.TempDir(), "m.db")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the server's own cleanup, so it runs after the
	// server has stopped.
	t.Cleanup(func() { _ = svc.Close() })
	return grpctest.Start(t, svc.Register)
}

func replica(t *testing.T, c memoryv1.SessionStoreServiceClient, addr string) (*Replica, *Store) {
	t.Helper()
	r := NewReplica(c, addr, slog.New(slog.DiscardHandler))
	r.Start(t.Context(), nil, nil)
	if err := r.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(context.Background()) })
	return r, NewStore(c, r, time.Hour)
}

func manifest(chunks ...string) json.RawMessage {
	values := map[string]any{}
	for i, c := range chunks {
		values[string(rune('a'+i))] = map[string]any{"chunk": c}
	}
	b, _ := json.Marshal(map[string]any{"v": 1, "values": values})
	return b
}

func TestOneLiveHolderAtATime(t *testing.T) {
	t.Parallel()
	c := store(t)
	ra, a := replica(t, c, "unix:/a.sock")
	_, b := replica(t, c, "unix:/b.sock")
	ctx := t.Context()
	held, err := a.Create(ctx, "t", map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, held, manifest("c1", "c2"), map[string][]byte{"c1": []byte("one"), "c2": []byte("two")}, 1, 0); err != nil {
		t.Fatal(err)
	}
	// B cannot take it while A's lease holds; it learns where A is.
	_, err = b.Claim(ctx, "t", held.Handle)
	var elsewhere *ElsewhereError
	if !errors.As(err, &elsewhere) || elsewhere.Address != "unix:/a.sock" || elsewhere.Replica != ra.ID {
		t.Fatalf("claim of a live session: %v", err)
	}
	// A gives its lease up (a clean stop): B takes the session, with
	// its checkpoint, and A can no longer commit.
	ra.Stop(ctx)
	taken, err := b.Claim(ctx, "t", held.Handle)
	if err != nil {
		t.Fatalf("claim after the holder stopped: %v", err)
	}
	if taken.State.Epoch != 2 || taken.State.Seq != 1 || taken.State.Labels["k"] != "v" {
		t.Errorf("taken state: %+v", taken.State)
	}
	st, chunks, err := b.Checkpoint(ctx, taken)
	if err != nil || st.Seq != 1 || string(chunks["c1"]) != "one" || string(chunks["c2"]) != "two" {
		t.Errorf("checkpoint after the takeover: seq %d, chunks %v, %v", st.Seq, chunks, err)
	}
	// The checkpoint is read in the session's turn: while a write of
	// this replica's holds it, the read waits (here until its context
	// ends) rather than read a state the write is replacing.
	if err := taken.lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiting, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := b.Checkpoint(waiting, taken); !errors.Is(err, context.Canceled) {
		t.Errorf("checkpoint read during a write: %v, want it to wait for the write's turn", err)
	}
	taken.unlock()
	// A free turn is taken even by a read whose context has ended, and a
	// session with no checkpoint needs nothing from the store: it reads
	// as empty rather than failing.
	fresh, err := b.Create(ctx, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 { // select would have picked the ended context half the time
		if st, chunks, err := b.Checkpoint(waiting, fresh); err != nil || len(st.Manifest) != 0 || len(chunks) != 0 {
			t.Fatalf("checkpoint of a session without one, with an ended context: %+v, %v, %v", st, chunks, err)
		}
	}
	if err := a.Commit(ctx, held, manifest("c9"), map[string][]byte{"c9": []byte("late")}, 2, 0); !errors.Is(err, ErrLost) {
		t.Errorf("a commit by the replica that lost the session: %v, want ErrLost", err)
	}
	// B's next checkpoint drops the chunk it no longer uses, and the one
	// A stored for the commit it lost, which no manifest names.
	if err := b.Commit(ctx, taken, manifest("c2", "c3"), map[string][]byte{"c3": []byte("three")}, 2, 0); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"c1", "c9"} {
		stream, err := c.GetChunks(ctx, &memoryv1.GetChunksRequest{Tenant: "t", Handle: held.Handle, Ids: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); status.Code(err) != codes.NotFound {
			t.Errorf("chunk %s, which the new checkpoint does not name: %v, want NotFound", id, err)
		}
	}
}

func TestUnknownSessions(t *testing.T) {
	t.Parallel()
	c := store(t)
	_, a := replica(t, c, "a")
	held, err := a.Create(t.Context(), "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tenant, handle string }{{"other", held.Handle}, {"t", NewHandle()}} {
		if _, err := a.Claim(t.Context(), tc.tenant, tc.handle); !errors.Is(err, ErrUnknown) {
			t.Errorf("Claim(%q, %q) = %v, want ErrUnknown", tc.tenant, tc.handle, err)
		}
	}
	if deleted, err := a.Delete(t.Context(), "t", held.Handle); err != nil || !deleted {
		t.Fatalf("Delete: %v, %v", deleted, err)
	}
	if _, err := a.Claim(t.Context(), "t", held.Handle); !errors.Is(err, ErrUnknown) {
		t.Errorf("a deleted session: %v", err)
	}
	// Its holder learns at its next checkpoint that the session has ended,
	// and stores none of that checkpoint's chunks.
	if err := a.Commit(t.Context(), held, manifest("c1"), map[string][]byte{"c1": []byte("late")}, 1, 0); !errors.Is(err, ErrLost) {
		t.Errorf("a checkpoint of a deleted session: %v, want ErrLost", err)
	}
	stream, err := c.GetChunks(t.Context(), &memoryv1.GetChunksRequest{Tenant: "t", Handle: held.Handle, Ids: []string{"c1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.NotFound {
		t.Errorf("a chunk of a deleted session's checkpoint was stored: %v", err)
	}
}

// A holder on this host whose process is gone loses its sessions at once,
// without waiting for its lease: the restart of `codeexec serve`.
func TestDeadHolderOnThisHost(t *testing.T) {
	t.Parallel()
	c := store(t)
	_, a := replica(t, c, "a")
	held, err := a.Create(t.Context(), "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	dead := &memoryv1.Replica{Id: "r-dead", Address: "x", ExpireTime: timestamppb.New(time.Now().Add(time.Hour)),
		Host: host, Pid: int64(gone.Process.Pid), BootId: a.replica.bootID}
	if _, err := c.PutReplica(t.Context(), &memoryv1.PutReplicaRequest{Replica: dead}); err != nil {
		t.Fatal(err)
	}
	st := held.State
	st.Owner = "r-dead"
	if err := a.write(t.Context(), held, st, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Claim(t.Context(), "t", held.Handle); err != nil {
		t.Errorf("claim from a dead holder on this host: %v", err)
	}
	// The same record on another host would have to wait for the lease.
	dead.Host = "elsewhere"
	if _, err := c.PutReplica(t.Context(), &memoryv1.PutReplicaRequest{Replica: dead}); err != nil {
		t.Fatal(err)
	}
	held2, _ := a.Create(t.Context(), "t", nil)
	st = held2.State
	st.Owner = "r-dead"
	if err := a.write(t.Context(), held2, st, nil); err != nil {
		t.Fatal(err)
	}
	var elsewhere *ElsewhereError
	if _, err := a.Claim(t.Context(), "t", held2.Handle); !errors.As(err, &elsewhere) {
		t.Errorf("claim from a holder on another host with a live lease: %v", err)
	}
}

// A replica whose heartbeats stop reaching the store fences itself before
// its lease can lapse for others.
func TestFencing(t *testing.T) {
	t.Parallel()
	c := store(t)
	r := NewReplica(c, "a", slog.New(slog.DiscardHandler))
	clock := time.Now()
	r.now = func() time.Time { return clock }
	tm := DefaultTiming
	if err := r.heartbeat(t.Context(), clock.Add(tm.Lease)); err != nil {
		t.Fatal(err)
	}
	if r.Fenced() {
		t.Fatal("fenced right after a heartbeat")
	}
	clock = clock.Add(tm.FenceAfter)
	if !r.Fenced() {
		t.Error("not fenced after FenceAfter without a heartbeat")
	}
	// The owner stops before others may start: Lease+Skew after its
	// last heartbeat, they may; FenceAfter after it, it must stop.
	if tm.FenceAfter >= tm.Lease || tm.BeatTimeout >= tm.FenceAfter {
		t.Fatalf("FenceAfter %v is not before the lease %v runs out, or after a heartbeat's timeout %v", tm.FenceAfter, tm.Lease, tm.BeatTimeout)
	}
}

// olderStore is a memoryd from before SessionChunks: it ignores the field.
type olderStore struct {
	memoryv1.SessionStoreServiceClient
}

func (o olderStore) PutSession(ctx context.Context, in *memoryv1.PutSessionRequest, opts ...grpc.CallOption) (*memoryv1.PutSessionResponse, error) {
	in.Chunks = nil
	return o.SessionStoreServiceClient.PutSession(ctx, in, opts...)
}

// TestCommitKeepsWhatEachStoreNeeds: beside a memoryd that ignores
// SessionChunks, a commit still drops the chunks the checkpoint before
// named and it does not; a commit refused for its size deletes the chunks
// it sent but not those the checkpoint before names, which is the one a
// restore will use.
func TestCommitKeepsWhatEachStoreNeeds(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	has := func(c memoryv1.SessionStoreServiceClient, handle, id string) bool {
		t.Helper()
		stream, err := c.GetChunks(ctx, &memoryv1.GetChunksRequest{Tenant: "t", Handle: handle, Ids: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = stream.Recv()
		if err != nil && status.Code(err) != codes.NotFound {
			t.Fatal(err)
		}
		return err == nil
	}

	old := olderStore{store(t)}
	_, s := replica(t, old, "unix:/old.sock")
	held, err := s.Create(ctx, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, held, manifest("c1", "c2"), map[string][]byte{"c1": []byte("one"), "c2": []byte("two")}, 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, held, manifest("c2", "c3"), map[string][]byte{"c3": []byte("three")}, 2, 0); err != nil {
		t.Fatal(err)
	}
	if has(old, held.Handle, "c1") || !has(old, held.Handle, "c2") || !has(old, held.Handle, "c3") {
		t.Errorf("beside an older memoryd: c1 %v, c2 %v, c3 %v; want only c2 and c3 kept",
			has(old, held.Handle, "c1"), has(old, held.Handle, "c2"), has(old, held.Handle, "c3"))
	}

	c := store(t)
	_, s = replica(t, c, "unix:/new.sock")
	held, err = s.Create(ctx, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, held, manifest("k1"), map[string][]byte{"k1": []byte("kept")}, 1, 16); err != nil {
		t.Fatal(err)
	}
	// k1 comes again (the agent resends what a checkpoint still on its
	// way may drop, codeexec_durable.py), beside a chunk that takes the
	// state over the cap.
	err = s.Commit(ctx, held, manifest("k1", "big"), map[string][]byte{"k1": []byte("kept"), "big": make([]byte, 64)}, 2, 16)
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a commit over the cap: %v, want InvalidArgument", err)
	}
	if !has(c, held.Handle, "k1") || has(c, held.Handle, "big") {
		t.Errorf("after a refused commit: k1 %v, big %v; want k1 kept for the checkpoint before, big gone",
			has(c, held.Handle, "k1"), has(c, held.Handle, "big"))
	}
}

// A checkpoint's chunks are its values' and its workspace files', so that
// the store keeps the files' chunks and the cap counts them.
func TestChunkIDsNameValuesAndFiles(t *testing.T) {
	t.Parallel()
	m := json.RawMessage(`{"v":1,"values":{"x":{"chunk":"c2","bytes":5}},` +
		`"workspace":{"files":{"a":{"chunks":["c1","c3"],"bytes":9},"b":{"chunks":["c3"],"bytes":4}},"dirs":["d"],"bytes":13}}`)
	if got, want := ChunkIDs(m), []string{"c1", "c2", "c3"}; !slices.Equal(got, want) {
		t.Errorf("ChunkIDs = %v, want %v", got, want)
	}
}
