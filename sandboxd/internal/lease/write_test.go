package lease

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
)

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
	if _, err := c.PutSession(ctx, &sessionstorev1.PutSessionRequest{
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
	if _, err := c.PutSession(ctx, &sessionstorev1.PutSessionRequest{
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
	sessionstorev1.SessionStoreServiceClient
	lose bool
}

func (l *losingStore) PutSession(ctx context.Context, in *sessionstorev1.PutSessionRequest, opts ...grpc.CallOption) (*sessionstorev1.PutSessionResponse, error) {
	resp, err := l.SessionStoreServiceClient.PutSession(ctx, in, opts...)
	if err == nil && l.lose {
		return nil, status.Error(codes.DeadlineExceeded, "context deadline exceeded (the answer was lost)")
	}
	return resp, err
}

// losingReplica is a replica on a losingStore, with a session it holds.
func losingReplica(t *testing.T) (*losingStore, *Store, *Lease) {
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
			rec, err := c.GetSession(ctx, &sessionstorev1.GetSessionRequest{Tenant: held.Tenant, Handle: held.Handle})
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
