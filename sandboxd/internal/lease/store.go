package lease

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/tick"
)

// Store reads and writes session records for one replica: it makes the
// leases of the sessions the replica takes.
type Store struct {
	client  sessionstorev1.SessionStoreServiceClient
	replica *Replica
	// TTL is how long an unused session is kept.
	TTL time.Duration
	// Env is the ID of the environment this replica's sandboxes run in,
	// which each checkpoint records (State.Env).
	Env string
}

// NewStore returns the store of sessions held by replica.
func NewStore(client sessionstorev1.SessionStoreServiceClient, replica *Replica, ttl time.Duration) *Store {
	return &Store{client: client, replica: replica, TTL: ttl}
}

// Replica is the replica the store holds sessions for.
func (s *Store) Replica() *Replica { return s.replica }

func (s *Store) expiry() *timestamppb.Timestamp {
	return timestamppb.New(s.replica.now().Add(s.TTL))
}

// ErrFenced refuses to take sessions while this replica's lease may lapse.
var ErrFenced = fmt.Errorf("this sandbox replica cannot reach the session store (it has not renewed its lease on its sessions for %s): it takes no session until the store answers again; retry the call", DefaultTiming.FenceAfter)

// Create makes a new session held by this replica.
func (s *Store) Create(ctx context.Context, tenant string, labels map[string]string) (*Lease, error) {
	return s.CreateAs(ctx, tenant, NewHandle(), labels)
}

// CreateAs is Create with the handle the caller chose. A session of the
// tenant that has the handle already is ErrExists, and is left alone.
func (s *Store) CreateAs(ctx context.Context, tenant, h string, labels map[string]string) (*Lease, error) {
	if err := s.replica.Ready(ctx); err != nil {
		return nil, err
	}
	if s.replica.Fenced() {
		return nil, ErrFenced
	}
	st := State{Owner: s.replica.ID, Epoch: 1, Created: s.replica.now().UTC(), Labels: labels}
	resp, err := s.client.PutSession(ctx, &sessionstorev1.PutSessionRequest{
		Tenant: tenant, Handle: h, State: st.encode(), ExpireTime: s.expiry(), ExpectedRevision: 0,
	})
	if status.Code(err) == codes.Aborted {
		return nil, ErrExists
	}
	if err != nil {
		return nil, fmt.Errorf("record a new session: %w", err)
	}
	return s.newLease(tenant, h, st, State{}, resp.GetSession().GetRevision()), nil
}

// Claim takes a session for this replica: one that no live replica holds,
// or whose holder's lease has lapsed. It fails with ErrUnknown, or with an
// *ElsewhereError naming the live holder.
func (s *Store) Claim(ctx context.Context, tenant, handle string) (*Lease, error) {
	if err := s.replica.Ready(ctx); err != nil {
		return nil, err
	}
	if s.replica.Fenced() {
		return nil, ErrFenced
	}
	for {
		resp, err := s.client.GetSession(ctx, &sessionstorev1.GetSessionRequest{Tenant: tenant, Handle: handle})
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
		put, err := s.client.PutSession(ctx, &sessionstorev1.PutSessionRequest{
			Tenant: tenant, Handle: handle, State: st.encode(), ExpireTime: s.expiry(), ExpectedRevision: rec.GetRevision(),
		})
		if status.Code(err) == codes.Aborted {
			continue // someone else moved it meanwhile: look again
		}
		if err != nil {
			return nil, fmt.Errorf("take the session: %w", err)
		}
		return s.newLease(tenant, handle, st, before, put.GetSession().GetRevision()), nil
	}
}

// Holder returns where a session is live when another live replica holds
// it, nil when none does (or the session is unknown).
func (s *Store) Holder(ctx context.Context, tenant, handle string) (*ElsewhereError, error) {
	resp, err := s.client.GetSession(ctx, &sessionstorev1.GetSessionRequest{Tenant: tenant, Handle: handle})
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
func (s *Store) liveElsewhere(ctx context.Context, st State) (*ElsewhereError, error) {
	if st.Owner == "" || st.Owner == s.replica.ID {
		return nil, nil
	}
	hb, err := s.client.GetReplica(ctx, &sessionstorev1.GetReplicaRequest{Id: st.Owner})
	switch {
	case err == nil && s.replica.alive(hb.GetReplica()):
		return &ElsewhereError{Replica: st.Owner, Address: hb.GetReplica().GetAddress()}, nil
	case err != nil && status.Code(err) != codes.NotFound:
		return nil, fmt.Errorf("read the heartbeat of replica %s: %w", st.Owner, err)
	}
	return nil, nil
}

// Delete ends the session and drops its checkpoint.
func (s *Store) Delete(ctx context.Context, tenant, handle string) (bool, error) {
	resp, err := s.client.DeleteSession(ctx, &sessionstorev1.DeleteSessionRequest{Tenant: tenant, Handle: handle})
	return resp.GetDeleted(), err
}

// Expire asks memoryd to forget expired sessions.
func (s *Store) Expire(ctx context.Context) (uint32, error) {
	resp, err := s.client.ExpireSessions(ctx, &sessionstorev1.ExpireSessionsRequest{})
	return resp.GetExpired(), err
}

// expireEvery spaces the sweeps of expired sessions out of the store.
const expireEvery = 10 * time.Minute

// Sweep asks the store to forget expired sessions now and then, until ctx
// ends.
func (s *Store) Sweep(ctx context.Context) {
	tick.Every(ctx.Done(), expireEvery, func() {
		if n, err := s.Expire(ctx); err != nil {
			s.replica.logger.Warn("could not sweep expired sessions", logkeys.Error, err)
		} else if n > 0 {
			s.replica.logger.Info("expired sessions forgotten", "sessions", n)
		}
	})
}
