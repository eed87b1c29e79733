package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
)

// maxPutChunksBytes bounds one PutChunks request, under the suite's
// message limit with room to spare.
const maxPutChunksBytes = 40 << 20

// Commit records a checkpoint: the chunks its manifest names first (the
// sandbox may send others; they are not stored), then the manifest, only
// if this replica still holds the session. memoryd then keeps exactly the
// chunks the manifest names, and refuses a manifest whose chunks hold more
// than limit bytes together (0: no cap), so what a session keeps in the
// store is bounded whatever its sandbox sends.
func (s *Store) Commit(ctx context.Context, l *Lease, manifest json.RawMessage, chunks map[string][]byte, seq uint64, limit int64) error {
	if err := s.writeTurn(ctx, l); err != nil {
		return err
	}
	defer l.unlock()
	keep := chunkIDs(manifest)
	named := make(map[string][]byte, len(chunks))
	for id, c := range chunks {
		if keep[id] {
			named[id] = c
		}
	}
	if err := s.putChunks(ctx, l, named); status.Code(err) == codes.NotFound {
		return ErrLost // the session ended meanwhile, on another replica
	} else if err != nil {
		return fmt.Errorf("store checkpoint chunks: %w", err)
	}
	prev := chunkIDs(l.State.Manifest)
	st := l.State
	st.Manifest, st.Seq, st.NotDurable, st.Env, st.Running = manifest, seq, "", s.Env, nil
	err := s.write(ctx, l, st, &sessionstorev1.SessionChunks{Ids: ChunkIDs(manifest), MaxBytes: uint64(max(limit, 0))})
	switch {
	case status.Code(err) == codes.InvalidArgument:
		// Over the cap, which the agent keeps to: the chunks just stored
		// go, so that a refused checkpoint leaves nothing behind, but not
		// those the checkpoint before names, which is still the one to
		// restore.
		if drop := missingFrom(prev, named); len(drop) > 0 {
			_, _ = s.client.DeleteChunks(ctx, &sessionstorev1.DeleteChunksRequest{Tenant: l.Tenant, Handle: l.Handle, Ids: drop})
		}
	case err == nil:
		// memoryd has kept only what the manifest names. One from before
		// SessionChunks ignores the field: the chunks the checkpoint
		// before named and this one does not are dropped here too, as
		// they were before, so that a newer sandboxd beside an older
		// memoryd leaks nothing it did not leak then.
		if drop := missingFrom(keep, prev); len(drop) > 0 {
			_, _ = s.client.DeleteChunks(ctx, &sessionstorev1.DeleteChunksRequest{Tenant: l.Tenant, Handle: l.Handle, Ids: drop})
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

func (s *Store) putChunks(ctx context.Context, l *Lease, chunks map[string][]byte) error {
	var batch []*sessionstorev1.Chunk
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := s.client.PutChunks(ctx, &sessionstorev1.PutChunksRequest{Tenant: l.Tenant, Handle: l.Handle, Chunks: batch})
		batch, size = nil, 0
		return err
	}
	for _, id := range sortedKeys(chunks) {
		if size+len(chunks[id]) > maxPutChunksBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, &sessionstorev1.Chunk{Id: id, Data: chunks[id]})
		size += len(chunks[id])
	}
	return flush()
}

// Checkpoint returns the held session's last stored checkpoint: the state
// that names it and its chunks. It reads them in l's turn, so that a
// commit still on its way (one an exec's wait gave up on) can neither
// change the state between the two reads nor drop the chunks the state
// names before they are read.
func (s *Store) Checkpoint(ctx context.Context, l *Lease) (State, map[string][]byte, error) {
	if err := s.writeTurn(ctx, l); err != nil {
		return State{}, nil, err
	}
	defer l.unlock()
	st := l.State
	ids := ChunkIDs(st.Manifest)
	out := make(map[string][]byte, len(ids))
	if len(ids) == 0 {
		return st, out, nil
	}
	stream, err := s.client.GetChunks(ctx, &sessionstorev1.GetChunksRequest{Tenant: l.Tenant, Handle: l.Handle, Ids: ids})
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

func sortedKeys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}
