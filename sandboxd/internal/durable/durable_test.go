package durable

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
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/services/grpctest"
)

// store runs a real memoryd on a bbolt file and returns a client of its
// SessionStoreService.
func store(t *testing.T) memoryv1.SessionStoreServiceClient {
	t.Helper()
	svc, err := memoryd.New(memoryd.Config{Path: filepath.Join(t.TempDir(), "m.db")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the server's own cleanup, so it runs after the
	// server has stopped.
	t.Cleanup(func() { _ = svc.Close() })
	return memoryv1.NewSessionStoreServiceClient(grpctest.Start(t, svc.Register))
}

func replica(t *testing.T, c memoryv1.SessionStoreServiceClient, addr string) (*Replica, *Sessions) {
	t.Helper()
	r := NewReplica(c, addr, slog.New(slog.DiscardHandler))
	r.Start(t.Context(), nil, nil)
	if err := r.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(context.Background()) })
	return r, NewSessions(c, r, time.Hour)
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
	if err := r.heartbeat(t.Context(), clock.Add(lease)); err != nil {
		t.Fatal(err)
	}
	if r.Fenced() {
		t.Fatal("fenced right after a heartbeat")
	}
	clock = clock.Add(fenceAfter)
	if !r.Fenced() {
		t.Error("not fenced after fenceAfter without a heartbeat")
	}
	// The owner stops before others may start: lease+skew after its
	// last heartbeat, they may; fenceAfter after it, it must stop.
	if fenceAfter >= lease {
		t.Fatalf("fenceAfter %v is not before the lease %v runs out", fenceAfter, lease)
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

// A session destroyed and created again under the same handle while its
// old holder could not reach the store can reach the revision the old
// holder last wrote. Reassert must tell it from the old holder's own
// session, and leave it alone, though a compare-and-swap on the revision
// alone would succeed.
func TestReassertLeavesASessionMadeAgainAlone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := store(t)
	_, a := replica(t, c, "unix:/a.sock")
	_, b := replica(t, c, "unix:/b.sock")
	const handle = "0123456789abcdef0123456789abcdef"
	old, err := a.CreateAs(ctx, "t", handle, map[string]string{"who": "old"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Reassert(ctx, old); !ok || err != nil {
		t.Fatalf("Reassert of the holder's own session: %v, %v; want true", ok, err)
	}
	// Revision 2 now. The session is destroyed, and made again on b,
	// which writes it once: revision 2 again.
	if deleted, err := a.Delete(ctx, "t", handle); !deleted || err != nil {
		t.Fatalf("Delete: %v, %v", deleted, err)
	}
	again, err := b.CreateAs(ctx, "t", handle, map[string]string{"who": "new"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx, again, manifest("c1"), map[string][]byte{"c1": []byte("new")}, 1, 0); err != nil {
		t.Fatal(err)
	}
	if again.revision != old.revision {
		t.Fatalf("the new session is at revision %d, the old holder wrote %d: the case is not set up", again.revision, old.revision)
	}
	if ok, err := a.Reassert(ctx, old); ok || err != nil {
		t.Fatalf("Reassert of a session made again: %v, %v; want false", ok, err)
	}
	// The new session is b's still, with its own state.
	st, chunks, err := b.Checkpoint(ctx, again)
	if err != nil || st.Labels["who"] != "new" || string(chunks["c1"]) != "new" {
		t.Fatalf("the new session after the old holder's Reassert: %+v, %v, %v", st, chunks, err)
	}
	if err := b.Commit(ctx, again, manifest("c2"), map[string][]byte{"c2": []byte("next")}, 2, 0); err != nil {
		t.Errorf("b's next commit: %v, want it to hold the session still", err)
	}
	// Once the record is gone, the old holder's Reassert says so too.
	if _, err := b.Delete(ctx, "t", handle); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Reassert(ctx, old); ok || err != nil {
		t.Fatalf("Reassert of a deleted session: %v, %v; want false", ok, err)
	}
}

// A Reassert whose write landed but whose answer was lost (its deadline
// ran out as the store came back) leaves the record one revision on, with
// this replica's own state: the next Reassert takes it for what it is and
// keeps the session, and the commits after it go on.
func TestReassertAfterItsOwnLostWrite(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := store(t)
	_, a := replica(t, c, "unix:/a.sock")
	held, err := a.Create(ctx, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The write, as Reassert sends it, without its answer reaching held.
	if _, err := c.PutSession(ctx, &memoryv1.PutSessionRequest{
		Tenant: held.Tenant, Handle: held.Handle, State: held.State.encode(),
		ExpireTime: timestamppb.New(time.Now().Add(time.Hour)), ExpectedRevision: held.revision,
	}); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Reassert(ctx, held); !ok || err != nil {
		t.Fatalf("Reassert after its own write's answer was lost: %v, %v; want true", ok, err)
	}
	if err := a.Commit(ctx, held, manifest("c1"), map[string][]byte{"c1": []byte("on")}, 1, 0); err != nil {
		t.Fatalf("a commit after that: %v, want the session held still", err)
	}
	// Another replica's takeover is not taken for such a write: it
	// changes the owner and the epoch.
	if _, err := c.PutSession(ctx, &memoryv1.PutSessionRequest{
		Tenant: held.Tenant, Handle: held.Handle, State: State{Owner: "b", Epoch: held.State.Epoch + 1, Created: held.State.Created}.encode(),
		ExpireTime: timestamppb.New(time.Now().Add(time.Hour)), ExpectedRevision: held.revision,
	}); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Reassert(ctx, held); ok || err != nil {
		t.Fatalf("Reassert after another replica's write: %v, %v; want false", ok, err)
	}
}

// losingStore stores each PutSession it is asked to, but while armed
// loses the answer: the caller is told its deadline ran out, as when the
// store answers late.
type losingStore struct {
	memoryv1.SessionStoreServiceClient
	lose bool
}

func (l *losingStore) PutSession(ctx context.Context, in *memoryv1.PutSessionRequest, opts ...grpc.CallOption) (*memoryv1.PutSessionResponse, error) {
	resp, err := l.SessionStoreServiceClient.PutSession(ctx, in, opts...)
	if err == nil && l.lose {
		return nil, status.Error(codes.DeadlineExceeded, "context deadline exceeded (the answer was lost)")
	}
	return resp, err
}

// losingReplica is a replica on a losingStore, with a session it holds.
func losingReplica(t *testing.T) (*losingStore, *Sessions, *Held) {
	t.Helper()
	c := &losingStore{SessionStoreServiceClient: store(t)}
	_, a := replica(t, c, "unix:/a.sock")
	held, err := a.Create(t.Context(), "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, a, held
}

// A checkpoint's commit that was stored, but whose answer was lost, is
// the session's checkpoint: memoryd has dropped the chunks of the one
// before it, so a restore from that one would miss them. The replica
// finds out from the record before it next reads or writes it, and keeps
// the session: a Reassert is true, the next commit is stored, and a
// restore reads the lost commit's checkpoint.
func TestACommitWhoseAnswerWasLost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, a, held := losingReplica(t)
	if err := a.Commit(ctx, held, manifest("c1"), map[string][]byte{"c1": []byte("one")}, 1, 0); err != nil {
		t.Fatal(err)
	}
	c.lose = true
	if err := a.Commit(ctx, held, manifest("c2"), map[string][]byte{"c2": []byte("two")}, 2, 0); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("the commit whose answer is lost: %v; want its deadline exceeded", err)
	}
	c.lose = false

	st, chunks, err := a.Checkpoint(ctx, held)
	if err != nil {
		t.Fatalf("Checkpoint after the lost answer: %v", err)
	}
	if st.Seq != 2 || string(chunks["c2"]) != "two" || len(chunks) != 1 {
		t.Errorf("Checkpoint after the lost answer: seq %d, chunks %q; want the stored one, seq 2 with c2", st.Seq, chunks)
	}
	if ok, err := a.Reassert(ctx, held); !ok || err != nil {
		t.Fatalf("Reassert after the lost answer: %v, %v; want the session still held", ok, err)
	}
	if err := a.Commit(ctx, held, manifest("c2", "c3"), map[string][]byte{"c2": []byte("two"), "c3": []byte("three")}, 3, 0); err != nil {
		t.Fatalf("the next commit: %v; want it stored", err)
	}
	if st, chunks, err := a.Checkpoint(ctx, held); err != nil || st.Seq != 3 || len(chunks) != 2 {
		t.Errorf("Checkpoint after the next commit: seq %d, chunks %q, %v; want seq 3 with c2 and c3", st.Seq, chunks, err)
	}
}

// The same, when the next thing the replica does is write: a commit, or
// giving the session up. Each finds the lost answer's write in the
// record, and is stored after it.
func TestAWriteAfterACommitWhoseAnswerWasLost(t *testing.T) {
	t.Parallel()
	for _, next := range []string{"commit", "release", "not durable"} {
		t.Run(next, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c, a, held := losingReplica(t)
			c.lose = true
			if err := a.Commit(ctx, held, manifest("c1"), map[string][]byte{"c1": []byte("one")}, 1, 0); err == nil {
				t.Fatal("the commit whose answer is lost succeeded")
			}
			c.lose = false
			var err error
			switch next {
			case "commit":
				err = a.Commit(ctx, held, manifest("c1", "c2"), map[string][]byte{"c1": []byte("one"), "c2": []byte("two")}, 2, 0)
			case "release":
				err = a.Release(ctx, held, "idle")
			case "not durable":
				err = a.NotDurable(ctx, held, "too large")
			}
			if err != nil {
				t.Fatalf("%s after the lost answer: %v; want it stored", next, err)
			}
			rec, err := c.GetSession(ctx, &memoryv1.GetSessionRequest{Tenant: held.Tenant, Handle: held.Handle})
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeState(rec.GetSession().GetState())
			if err != nil {
				t.Fatal(err)
			}
			if ids := ChunkIDs(got.Manifest); len(ids) == 0 || ids[0] != "c1" {
				t.Errorf("%s after the lost answer left the record naming %v; want c1 first, from the lost answer's commit", next, ids)
			}
		})
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
