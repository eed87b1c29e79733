package lease

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
)

// write stores l's state if this replica still holds the session. A
// revision that moved means another replica took it over: ErrLost. chunks,
// when not nil, makes it a checkpoint's commit (see Commit).
func (s *Store) write(ctx context.Context, l *Lease, st State, chunks *sessionstorev1.SessionChunks) error {
	encoded := st.encode()
	resp, err := s.client.PutSession(ctx, &sessionstorev1.PutSessionRequest{
		Tenant: l.Tenant, Handle: l.Handle, State: encoded, ExpireTime: s.expiry(), ExpectedRevision: l.revision,
		Chunks: chunks,
	})
	switch code := status.Code(err); {
	case code == codes.Aborted:
		return ErrLost
	case answerLost(code):
		l.doubt = &doubtfulWrite{state: st, encoded: encoded}
		return err
	case err != nil:
		return err
	}
	// Stored at a new revision: a doubtful write before it, a
	// compare-and-swap on an older one, can no longer be.
	l.State, l.revision, l.doubt = st, resp.GetSession().GetRevision(), nil
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

// writeTurn takes l's turn to write (see lock) and settles a doubtful
// write (see settleDoubt); the caller gives the turn back with l.unlock.
func (s *Store) writeTurn(ctx context.Context, l *Lease) error {
	if err := l.lock(ctx); err != nil {
		return err
	}
	if err := s.settleDoubt(ctx, l); err != nil {
		l.unlock()
		return err
	}
	return nil
}

// settleDoubt finds out, when l's last write is doubtful, whether the store
// has it (see adopt), before the state l holds is read or written anew:
// a commit stored whose answer was lost has dropped the chunks of the
// checkpoint before it, which l would otherwise still name. A write l
// makes next fails as a takeover would if the doubtful one is stored
// after this read.
func (s *Store) settleDoubt(ctx context.Context, l *Lease) error {
	if l.doubt == nil {
		return nil
	}
	resp, err := s.client.GetSession(ctx, &sessionstorev1.GetSessionRequest{Tenant: l.Tenant, Handle: l.Handle})
	if status.Code(err) == codes.NotFound {
		return nil // ended elsewhere: the next write says so
	}
	if err != nil {
		return fmt.Errorf("read the session record to learn whether its last write was stored: %w", err)
	}
	l.adopt(resp.GetSession())
	return nil
}

// Reassert confirms that this replica still holds l's session: it
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
func (s *Store) Reassert(ctx context.Context, l *Lease) (bool, error) {
	if err := l.lock(ctx); err != nil {
		return false, err
	}
	defer l.unlock()
	cur, err := s.client.GetSession(ctx, &sessionstorev1.GetSessionRequest{Tenant: l.Tenant, Handle: l.Handle})
	if status.Code(err) == codes.NotFound {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the session record: %w", err)
	}
	rec := cur.GetSession()
	if !l.adopt(rec) && (rec.GetRevision() < l.revision || !bytes.Equal(rec.GetState(), l.State.encode())) {
		return false, nil
	}
	l.revision = rec.GetRevision()
	state := l.State.encode()
	resp, err := s.client.PutSession(ctx, &sessionstorev1.PutSessionRequest{
		Tenant: l.Tenant, Handle: l.Handle, State: state, ExpireTime: s.expiry(), ExpectedRevision: l.revision,
	})
	if err == nil {
		l.revision = resp.GetSession().GetRevision()
		return true, nil
	}
	if code := status.Code(err); code == codes.Aborted || code == codes.NotFound {
		return false, nil
	}
	return false, fmt.Errorf("rewrite the session record: %w", err)
}

// NotDurable records why the session's state could not be checkpointed;
// the last checkpoint (if any) stays.
func (s *Store) NotDurable(ctx context.Context, l *Lease, why string) error {
	return s.change(ctx, l, func(st *State) { st.NotDurable = why })
}

// Release gives the session up (its sandbox is stopping, for the reason
// why): any replica may take it at once.
func (s *Store) Release(ctx context.Context, l *Lease, why string) error {
	return s.change(ctx, l, func(st *State) { st.Owner, st.Stopped = "", why })
}

// MarkRunning records in the session's record that a run which outlives
// its call is in flight since began (nil: none is), so that a replica
// taking the session over knows the run was interrupted. A checkpoint's
// commit clears the mark too.
func (l *Lease) MarkRunning(ctx context.Context, began *time.Time) error {
	if l == nil {
		return nil
	}
	return l.store.change(ctx, l, func(st *State) { st.Running = began })
}

// change writes l's state as edit changes it, if this replica still holds
// the session.
func (s *Store) change(ctx context.Context, l *Lease, edit func(*State)) error {
	if err := s.writeTurn(ctx, l); err != nil {
		return err
	}
	defer l.unlock()
	st := l.State
	edit(&st)
	return s.write(ctx, l, st, nil)
}
