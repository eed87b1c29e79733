package durable

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
)

// maxPutChunksBytes bounds one PutChunks request, under the suite's
// message limit with room to spare.
const maxPutChunksBytes = 40 << 20

// Sessions reads and writes session records for one replica.
type Sessions struct {
	client  memoryv1.SessionStoreServiceClient
	replica *Replica
	// TTL is how long an unused session is kept.
	TTL time.Duration
	// Env is the ID of the environment this replica's sandboxes run in,
	// which each checkpoint records (State.Env).
	Env string
}

// NewSessions returns the store of sessions held by replica.
func NewSessions(client memoryv1.SessionStoreServiceClient, replica *Replica, ttl time.Duration) *Sessions {
	return &Sessions{client: client, replica: replica, TTL: ttl}
}

// Held is a session this replica holds: its state and the record revision
// this replica wrote last, which its next write must find.
type Held struct {
	Tenant, Handle string
	State          State
	// Before is the session as it was when this replica took it: the
	// replica that had held it (Before.Owner, "" when it had been given
	// up) and why it stopped (Before.Stopped).
	Before State
	// turn makes this replica's writes of the record one at a time (each
	// is a compare-and-swap on revision, the one the last wrote), and a
	// writer waiting for it gives up when its context ends.
	turn     chan struct{}
	revision uint64
	// doubt is this replica's last write of the record when its answer
	// did not come (its deadline ran out, the connection broke): the
	// store may have stored it or not. The next read of the record tells
	// (settle).
	doubt *doubtfulWrite
}

// doubtfulWrite is a write whose answer did not come: the state it wrote,
// and its encoding as stored.
type doubtfulWrite struct {
	state   State
	encoded []byte
}

// adopt takes the record read from the store for h's doubtful write when
// it holds that write's state at a later revision than h's: the write
// was stored, so its state is h's, at the record's revision. Another
// replica's write cannot hold that state (taking a session over changes
// its owner and epoch).
func (h *Held) adopt(rec *memoryv1.SessionRecord) bool {
	d := h.doubt
	if d == nil || rec.GetRevision() <= h.revision || !bytes.Equal(rec.GetState(), d.encoded) {
		return false
	}
	h.State, h.revision, h.doubt = d.state, rec.GetRevision(), nil
	return true
}

// lock waits for h's turn to write, until ctx ends. A turn that is free
// is taken even when ctx has ended (select would pick either at random):
// taking it costs nothing, and what is done in it is bounded by ctx.
func (h *Held) lock(ctx context.Context) error {
	select {
	case h.turn <- struct{}{}:
		return nil
	default:
	}
	select {
	case h.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for this replica's previous write of the session record: %w", ctx.Err())
	}
}

func (h *Held) unlock() { <-h.turn }

func (s *Sessions) expiry() *timestamppb.Timestamp {
	return timestamppb.New(s.replica.now().Add(s.TTL))
}

// ErrFenced refuses to take sessions while this replica's lease may lapse.
var ErrFenced = fmt.Errorf("this sandbox replica cannot reach the session store (it has not renewed its lease on its sessions for %s): it takes no session until the store answers again; retry the call", fenceAfter)

// Create makes a new session held by this replica.
func (s *Sessions) Create(ctx context.Context, tenant string, labels map[string]string) (*Held, error) {
	return s.CreateAs(ctx, tenant, NewHandle(), labels)
}

// CreateAs is Create with the handle the caller chose. A session of the
// tenant that has the handle already is ErrExists, and is left alone.
func (s *Sessions) CreateAs(ctx context.Context, tenant, h string, labels map[string]string) (*Held, error) {
	if err := s.replica.Ready(ctx); err != nil {
		return nil, err
	}
	if s.replica.Fenced() {
		return nil, ErrFenced
	}
	st := State{Owner: s.replica.ID, Epoch: 1, Created: s.replica.now().UTC(), Labels: labels}
	resp, err := s.client.PutSession(ctx, &memoryv1.PutSessionRequest{
		Tenant: tenant, Handle: h, State: st.encode(), ExpireTime: s.expiry(), ExpectedRevision: 0,
	})
	if status.Code(err) == codes.Aborted {
		return nil, ErrExists
	}
	if err != nil {
		return nil, fmt.Errorf("record a new session: %w", err)
	}
	return &Held{Tenant: tenant, Handle: h, State: st, revision: resp.GetSession().GetRevision(), turn: make(chan struct{}, 1)}, nil
}

// Claim takes a session for this replica: one that no live replica holds,
// or whose holder's lease has lapsed. It fails with ErrUnknown, or with an
// *ElsewhereError naming the live holder.
func (s *Sessions) Claim(ctx context.Context, tenant, handle string) (*Held, error) {
	if err := s.replica.Ready(ctx); err != nil {
		return nil, err
	}
	if s.replica.Fenced() {
		return nil, ErrFenced
	}
	for {
		resp, err := s.client.GetSession(ctx, &memoryv1.GetSessionRequest{Tenant: tenant, Handle: handle})
		if status.Code(err) == codes.NotFound {
			return nil, ErrUnknown
		}
		if err != nil {
			return nil, fmt.Errorf("read session record: %w", err)
		}
		rec := resp.GetSession()
		st, err := decodeState(rec.GetState())
		if err != nil {
			return nil, err
		}
		where, err := s.liveElsewhere(ctx, st)
		if err != nil {
			return nil, err
		}
		if where != nil {
			return nil, where
		}
		before := st
		st.Owner, st.Stopped = s.replica.ID, ""
		st.Epoch++
		put, err := s.client.PutSession(ctx, &memoryv1.PutSessionRequest{
			Tenant: tenant, Handle: handle, State: st.encode(), ExpireTime: s.expiry(), ExpectedRevision: rec.GetRevision(),
		})
		if status.Code(err) == codes.Aborted {
			continue // someone else moved it meanwhile: look again
		}
		if err != nil {
			return nil, fmt.Errorf("take the session: %w", err)
		}
		return &Held{Tenant: tenant, Handle: handle, State: st, Before: before, revision: put.GetSession().GetRevision(), turn: make(chan struct{}, 1)}, nil
	}
}

// Reassert confirms that this replica still holds h's session: it
// rewrites the record unchanged, compare-and-swap on the revision this
// replica last wrote, so that a replica that read the record before (and
// judged this one's lease lapsed) fails its own compare-and-swap and
// looks again. false means that another replica took the session over,
// or that it ended.
//
// The record is read first, and rewritten only if it holds the very state
// this replica last wrote, or the state of a write of its own whose
// answer was lost (see adopt):
//   - a revision counts the writes of one record, from 1 again when a
//     record is deleted and made anew, so a session destroyed and created
//     again under the same ID (a chosen one) while this replica could not
//     reach the store may have come to the revision this replica last
//     wrote; the compare-and-swap alone would take it for this one and
//     overwrite it;
//   - a later revision with this replica's state is an earlier Reassert
//     of its own whose answer was lost (its deadline ran out as the store
//     came back): no other replica writes that state, as taking a session
//     over changes its owner and epoch. The session is still this
//     replica's.
func (s *Sessions) Reassert(ctx context.Context, h *Held) (bool, error) {
	if err := h.lock(ctx); err != nil {
		return false, err
	}
	defer h.unlock()
	cur, err := s.client.GetSession(ctx, &memoryv1.GetSessionRequest{Tenant: h.Tenant, Handle: h.Handle})
	if status.Code(err) == codes.NotFound {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the session record: %w", err)
	}
	rec := cur.GetSession()
	if !h.adopt(rec) && (rec.GetRevision() < h.revision || !bytes.Equal(rec.GetState(), h.State.encode())) {
		return false, nil
	}
	h.revision = rec.GetRevision()
	state := h.State.encode()
	resp, err := s.client.PutSession(ctx, &memoryv1.PutSessionRequest{
		Tenant: h.Tenant, Handle: h.Handle, State: state, ExpireTime: s.expiry(), ExpectedRevision: h.revision,
	})
	if err == nil {
		h.revision = resp.GetSession().GetRevision()
		return true, nil
	}
	if code := status.Code(err); code == codes.Aborted || code == codes.NotFound {
		return false, nil
	}
	return false, fmt.Errorf("rewrite the session record: %w", err)
}

// Holder returns where a session is live when another live replica holds
// it, nil when none does (or the session is unknown).
func (s *Sessions) Holder(ctx context.Context, tenant, handle string) (*ElsewhereError, error) {
	resp, err := s.client.GetSession(ctx, &memoryv1.GetSessionRequest{Tenant: tenant, Handle: handle})
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read session record: %w", err)
	}
	st, err := decodeState(resp.GetSession().GetState())
	if err != nil {
		return nil, err
	}
	return s.liveElsewhere(ctx, st)
}

// liveElsewhere returns where st's holder is, when that is another replica
// and its lease is current.
func (s *Sessions) liveElsewhere(ctx context.Context, st State) (*ElsewhereError, error) {
	if st.Owner == "" || st.Owner == s.replica.ID {
		return nil, nil
	}
	hb, err := s.client.GetReplica(ctx, &memoryv1.GetReplicaRequest{Id: st.Owner})
	switch {
	case err == nil && s.replica.alive(hb.GetReplica()):
		return &ElsewhereError{Replica: st.Owner, Address: hb.GetReplica().GetAddress()}, nil
	case err != nil && status.Code(err) != codes.NotFound:
		return nil, fmt.Errorf("read the heartbeat of replica %s: %w", st.Owner, err)
	}
	return nil, nil
}

// write stores h's state if this replica still holds the session. A
// revision that moved means another replica took it over: ErrLost. chunks,
// when not nil, makes it a checkpoint's commit (see Commit).
func (s *Sessions) write(ctx context.Context, h *Held, st State, chunks *memoryv1.SessionChunks) error {
	encoded := st.encode()
	resp, err := s.client.PutSession(ctx, &memoryv1.PutSessionRequest{
		Tenant: h.Tenant, Handle: h.Handle, State: encoded, ExpireTime: s.expiry(), ExpectedRevision: h.revision,
		Chunks: chunks,
	})
	switch code := status.Code(err); {
	case code == codes.Aborted:
		return ErrLost
	case answerLost(code):
		h.doubt = &doubtfulWrite{state: st, encoded: encoded}
		return err
	case err != nil:
		return err
	}
	// Stored at a new revision: a doubtful write before it, a
	// compare-and-swap on an older one, can no longer be.
	h.State, h.revision, h.doubt = st, resp.GetSession().GetRevision(), nil
	return nil
}

// answerLost reports whether a write that failed with code may have been
// stored all the same: the call's deadline ran out, or the connection
// broke, after the request may have reached the store.
func answerLost(code codes.Code) bool {
	switch code {
	case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable, codes.Unknown, codes.Internal:
		return true
	default:
		return false
	}
}

// hold takes h's turn to write (see lock) and settles a doubtful write
// (see settle); the caller gives the turn back with h.unlock.
func (s *Sessions) hold(ctx context.Context, h *Held) error {
	if err := h.lock(ctx); err != nil {
		return err
	}
	if err := s.settle(ctx, h); err != nil {
		h.unlock()
		return err
	}
	return nil
}

// settle finds out, when h's last write is doubtful, whether the store
// has it (see adopt), before the state h holds is read or written anew:
// a commit stored whose answer was lost has dropped the chunks of the
// checkpoint before it, which h would otherwise still name. A write h
// makes next fails as a takeover would if the doubtful one is stored
// after this read.
func (s *Sessions) settle(ctx context.Context, h *Held) error {
	if h.doubt == nil {
		return nil
	}
	resp, err := s.client.GetSession(ctx, &memoryv1.GetSessionRequest{Tenant: h.Tenant, Handle: h.Handle})
	if status.Code(err) == codes.NotFound {
		return nil // ended elsewhere: the next write says so
	}
	if err != nil {
		return fmt.Errorf("read the session record to learn whether its last write was stored: %w", err)
	}
	h.adopt(resp.GetSession())
	return nil
}

// Commit records a checkpoint: the chunks its manifest names first (the
// sandbox may send others; they are not stored), then the manifest, only
// if this replica still holds the session. memoryd then keeps exactly the
// chunks the manifest names, and refuses a manifest whose chunks hold more
// than limit bytes together (0: no cap), so what a session keeps in the
// store is bounded whatever its sandbox sends.
func (s *Sessions) Commit(ctx context.Context, h *Held, manifest json.RawMessage, chunks map[string][]byte, seq uint64, limit int64) error {
	if err := s.hold(ctx, h); err != nil {
		return err
	}
	defer h.unlock()
	keep := chunkIDs(manifest)
	named := make(map[string][]byte, len(chunks))
	for id, c := range chunks {
		if keep[id] {
			named[id] = c
		}
	}
	if err := s.putChunks(ctx, h, named); status.Code(err) == codes.NotFound {
		return ErrLost // the session ended meanwhile, on another replica
	} else if err != nil {
		return fmt.Errorf("store checkpoint chunks: %w", err)
	}
	prev := chunkIDs(h.State.Manifest)
	st := h.State
	st.Manifest, st.Seq, st.NotDurable, st.Env = manifest, seq, "", s.Env
	err := s.write(ctx, h, st, &memoryv1.SessionChunks{Ids: ChunkIDs(manifest), MaxBytes: uint64(max(limit, 0))})
	switch {
	case status.Code(err) == codes.InvalidArgument:
		// Over the cap, which the agent keeps to: the chunks just stored
		// go, so that a refused checkpoint leaves nothing behind, but not
		// those the checkpoint before names, which is still the one to
		// restore.
		if drop := missingFrom(prev, named); len(drop) > 0 {
			_, _ = s.client.DeleteChunks(ctx, &memoryv1.DeleteChunksRequest{Tenant: h.Tenant, Handle: h.Handle, Ids: drop})
		}
	case err == nil:
		// memoryd has kept only what the manifest names. One from before
		// SessionChunks ignores the field: the chunks the checkpoint
		// before named and this one does not are dropped here too, as
		// they were before, so that a newer sandboxd beside an older
		// memoryd leaks nothing it did not leak then.
		if drop := missingFrom(keep, prev); len(drop) > 0 {
			_, _ = s.client.DeleteChunks(ctx, &memoryv1.DeleteChunksRequest{Tenant: h.Tenant, Handle: h.Handle, Ids: drop})
		}
	}
	return err
}

// missingFrom returns the ids of m that set lacks, sorted.
func missingFrom[V any](set map[string]bool, m map[string]V) []string {
	var out []string
	for id := range m {
		if !set[id] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func (s *Sessions) putChunks(ctx context.Context, h *Held, chunks map[string][]byte) error {
	var batch []*memoryv1.Chunk
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := s.client.PutChunks(ctx, &memoryv1.PutChunksRequest{Tenant: h.Tenant, Handle: h.Handle, Chunks: batch})
		batch, size = nil, 0
		return err
	}
	for _, id := range sortedKeys(chunks) {
		if size+len(chunks[id]) > maxPutChunksBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, &memoryv1.Chunk{Id: id, Data: chunks[id]})
		size += len(chunks[id])
	}
	return flush()
}

// NotDurable records why the session's state could not be checkpointed;
// the last checkpoint (if any) stays.
func (s *Sessions) NotDurable(ctx context.Context, h *Held, why string) error {
	return s.change(ctx, h, func(st *State) { st.NotDurable = why })
}

// Release gives the session up (its sandbox is stopping, for the reason
// why): any replica may take it at once.
func (s *Sessions) Release(ctx context.Context, h *Held, why string) error {
	return s.change(ctx, h, func(st *State) { st.Owner, st.Stopped = "", why })
}

// change writes h's state as edit changes it, if this replica still holds
// the session.
func (s *Sessions) change(ctx context.Context, h *Held, edit func(*State)) error {
	if err := s.hold(ctx, h); err != nil {
		return err
	}
	defer h.unlock()
	st := h.State
	edit(&st)
	return s.write(ctx, h, st, nil)
}

// Delete ends the session and drops its checkpoint.
func (s *Sessions) Delete(ctx context.Context, tenant, handle string) (bool, error) {
	resp, err := s.client.DeleteSession(ctx, &memoryv1.DeleteSessionRequest{Tenant: tenant, Handle: handle})
	return resp.GetDeleted(), err
}

// Checkpoint returns the held session's last stored checkpoint: the state
// that names it and its chunks. It reads them in h's turn, so that a
// commit still on its way (one an exec's wait gave up on) can neither
// change the state between the two reads nor drop the chunks the state
// names before they are read.
func (s *Sessions) Checkpoint(ctx context.Context, h *Held) (State, map[string][]byte, error) {
	if err := s.hold(ctx, h); err != nil {
		return State{}, nil, err
	}
	defer h.unlock()
	st := h.State
	ids := ChunkIDs(st.Manifest)
	out := make(map[string][]byte, len(ids))
	if len(ids) == 0 {
		return st, out, nil
	}
	stream, err := s.client.GetChunks(ctx, &memoryv1.GetChunksRequest{Tenant: h.Tenant, Handle: h.Handle, Ids: ids})
	if err != nil {
		return State{}, nil, err
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return st, out, nil
		}
		if err != nil {
			return State{}, nil, fmt.Errorf("read checkpoint chunks: %w", err)
		}
		out[m.GetChunk().GetId()] = m.GetChunk().GetData()
	}
}

// Expire asks memoryd to forget expired sessions.
func (s *Sessions) Expire(ctx context.Context) (uint32, error) {
	resp, err := s.client.ExpireSessions(ctx, &memoryv1.ExpireSessionsRequest{})
	return resp.GetExpired(), err
}

func sortedKeys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}
