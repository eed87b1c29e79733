package route

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/logkeys"
)

var _ sandboxv1.SandboxServiceClient = (*Balancer)(nil)

// CreateSession implements SandboxServiceClient: it creates the session on
// the best replica, trying the others in turn while replicas are
// unreachable.
func (b *Balancer) CreateSession(ctx context.Context, in *sandboxv1.CreateSessionRequest, opts ...grpc.CallOption) (*sandboxv1.CreateSessionResponse, error) {
	var errs []error
	for _, r := range b.pick() {
		resp, err := r.client.CreateSession(ctx, in, opts...)
		if err == nil {
			b.mu.Lock()
			if b.replicas[r.addr] == r {
				b.sessions[resp.GetSession().GetId()] = r
				r.live++
				if !r.healthy {
					r.healthy = true
					b.logger.Info("sandboxd replica is healthy again", logkeys.Address, r.addr)
				}
			}
			b.mu.Unlock()
			return resp, nil
		}
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			// The replica answered (quota, bad input) or the caller gave up:
			// another replica would say the same.
			return nil, err
		}
		b.mu.Lock()
		if b.replicas[r.addr] == r && r.healthy {
			b.loseSessionsLocked(r, "it is unreachable: "+status.Convert(err).Message())
		}
		b.mu.Unlock()
		errs = append(errs, fmt.Errorf("%s: %s", r.addr, status.Convert(err).Message()))
	}
	if len(errs) == 0 {
		return nil, status.Error(codes.Unavailable, "no sandboxd replica is known: check the --sandbox address")
	}
	return nil, status.Errorf(codes.Unavailable, "no sandboxd replica could create a session: %v", errors.Join(errs...))
}

// Execute implements SandboxServiceClient. An unreachable replica before
// the first message becomes NotFound ("session lost: …").
//
// A session this gateway has not placed, or whose replica went away, is
// asked of the best healthy replica: a durable session lives in the
// session store, so that replica takes it over (or answers
// SessionElsewhere, naming the replica that holds it). Only when it does
// not know the session either is the session lost.
func (b *Balancer) Execute(ctx context.Context, in *sandboxv1.ExecuteRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[sandboxv1.ExecuteResponse], error) {
	id := in.GetSessionId()
	r, lost := b.route(id)
	if lost != nil {
		return b.executeAnywhere(ctx, in, lost, opts...)
	}
	stream, err := r.client.Execute(ctx, in, opts...)
	if err != nil {
		return b.executeAnywhere(ctx, in, b.failed(r, id, err), opts...)
	}
	elsewhere := func(lost error) (grpc.ServerStreamingClient[sandboxv1.ExecuteResponse], error) {
		return b.executeAnywhere(ctx, in, lost, opts...)
	}
	return &execStream{ServerStreamingClient: stream, b: b, r: r, id: id, elsewhere: elsewhere}, nil
}

// executeAnywhere sends an Execute for a session that no replica is known
// to hold to the best replica that answers. lost is what to say if none
// knows the session.
func (b *Balancer) executeAnywhere(ctx context.Context, in *sandboxv1.ExecuteRequest, lost error, opts ...grpc.CallOption) (grpc.ServerStreamingClient[sandboxv1.ExecuteResponse], error) {
	return b.executeAnywhereTry(ctx, in, lost, 0, opts...)
}

// anywhereTries bounds the replicas one call asks for a session none is
// known to hold, when those asked turn out to be gone.
const anywhereTries = 3

func (b *Balancer) executeAnywhereTry(ctx context.Context, in *sandboxv1.ExecuteRequest, lost error, tries int, opts ...grpc.CallOption) (grpc.ServerStreamingClient[sandboxv1.ExecuteResponse], error) {
	if tries >= anywhereTries {
		return nil, lost
	}
	for _, r := range b.pick() {
		stream, err := r.client.Execute(ctx, in, opts...)
		if err != nil {
			continue
		}
		return &execStream{ServerStreamingClient: stream, b: b, r: r, id: in.GetSessionId(), lost: lost, tries: tries + 1,
			elsewhere: func(lost error) (grpc.ServerStreamingClient[sandboxv1.ExecuteResponse], error) {
				return b.executeAnywhereTry(ctx, in, lost, tries+1, opts...)
			}}, nil
	}
	return nil, lost
}

// execStream turns a replica failure on the first Recv into "session lost".
// After output has arrived the error passes through as it is: the caller
// reports the call as failed, and the next call finds the session lost.
type execStream struct {
	grpc.ServerStreamingClient[sandboxv1.ExecuteResponse]
	b    *Balancer
	r    *replica
	id   string
	seen bool
	// lost is set when the session was asked of r without being placed
	// there: r's answer places it, or NotFound means it is lost, for the
	// reason lost gives.
	lost error
	// elsewhere asks another replica, when r turns out to be gone before
	// it answered; nil once used. tries counts the replicas asked for a
	// session none was known to hold.
	elsewhere func(lost error) (grpc.ServerStreamingClient[sandboxv1.ExecuteResponse], error)
	tries     int
}

func (s *execStream) Recv() (*sandboxv1.ExecuteResponse, error) {
	m, err := s.ServerStreamingClient.Recv()
	if err == nil {
		if !s.seen && s.lost != nil {
			s.b.place(s.r, s.id)
		}
		s.seen = true
		return m, nil
	}
	if errors.Is(err, io.EOF) {
		return nil, err
	}
	if !s.seen && s.lost != nil {
		if status.Code(err) == codes.NotFound {
			return nil, s.lost
		}
		if status.Code(err) == codes.Unavailable {
			// That replica is gone too: ask the next (marked unhealthy
			// now, it is not picked again).
			_ = s.b.failed(s.r, s.id, err)
			next, aerr := s.elsewhere(s.lost)
			if aerr != nil {
				return nil, aerr
			}
			s.ServerStreamingClient, s.lost, s.elsewhere = next, nil, nil
			return s.Recv()
		}
		return nil, err // SessionElsewhere, a tenant's quota, ...
	}
	if !s.seen {
		lost := s.b.failed(s.r, s.id, err)
		if status.Code(err) != codes.Unavailable || s.elsewhere == nil {
			return nil, lost
		}
		// Its replica is gone before it ran anything: another replica may
		// take a durable session over.
		next, aerr := s.elsewhere(lost)
		if aerr != nil {
			return nil, aerr
		}
		s.ServerStreamingClient, s.elsewhere = next, nil
		return s.Recv()
	}
	if status.Code(err) == codes.Unavailable {
		_ = s.b.failed(s.r, s.id, err) // mark the replica and its sessions
	}
	return nil, err
}

// onReplica makes one call on the replica that holds session id. A
// failure of the replica itself becomes NotFound ("session lost: …").
// after, when set, runs once the replica has answered, either way.
func onReplica[Resp any](b *Balancer, id string, call func(sandboxv1.SandboxServiceClient) (Resp, error), after func(*replica)) (Resp, error) {
	var zero Resp
	r, err := b.route(id)
	if err != nil {
		return zero, err
	}
	resp, err := call(r.client)
	if after != nil {
		after(r)
	}
	if err != nil {
		return zero, b.failed(r, id, err)
	}
	return resp, nil
}

// ResetSession implements SandboxServiceClient.
func (b *Balancer) ResetSession(ctx context.Context, in *sandboxv1.ResetSessionRequest, opts ...grpc.CallOption) (*sandboxv1.ResetSessionResponse, error) {
	return onReplica(b, in.GetSessionId(), func(c sandboxv1.SandboxServiceClient) (*sandboxv1.ResetSessionResponse, error) {
		return c.ResetSession(ctx, in, opts...)
	}, nil)
}

// DestroySession implements SandboxServiceClient. The session is forgotten
// whatever the replica says.
func (b *Balancer) DestroySession(ctx context.Context, in *sandboxv1.DestroySessionRequest, opts ...grpc.CallOption) (*sandboxv1.DestroySessionResponse, error) {
	return onReplica(b, in.GetSessionId(), func(c sandboxv1.SandboxServiceClient) (*sandboxv1.DestroySessionResponse, error) {
		return c.DestroySession(ctx, in, opts...)
	}, func(r *replica) { b.forget(r, in.GetSessionId()) })
}

// GetSession implements SandboxServiceClient.
func (b *Balancer) GetSession(ctx context.Context, in *sandboxv1.GetSessionRequest, opts ...grpc.CallOption) (*sandboxv1.GetSessionResponse, error) {
	return onReplica(b, in.GetSessionId(), func(c sandboxv1.SandboxServiceClient) (*sandboxv1.GetSessionResponse, error) {
		return c.GetSession(ctx, in, opts...)
	}, nil)
}

// AnswerApproval implements SandboxServiceClient: the answer goes to the
// replica that holds the session, whose run asked.
func (b *Balancer) AnswerApproval(ctx context.Context, in *sandboxv1.AnswerApprovalRequest, opts ...grpc.CallOption) (*sandboxv1.AnswerApprovalResponse, error) {
	return onReplica(b, in.GetSessionId(), func(c sandboxv1.SandboxServiceClient) (*sandboxv1.AnswerApprovalResponse, error) {
		return c.AnswerApproval(ctx, in, opts...)
	}, nil)
}

// ListSessions implements SandboxServiceClient: the sessions of every
// healthy replica. A replica that does not answer is left out.
func (b *Balancer) ListSessions(ctx context.Context, in *sandboxv1.ListSessionsRequest, opts ...grpc.CallOption) (*sandboxv1.ListSessionsResponse, error) {
	out := &sandboxv1.ListSessionsResponse{}
	var firstErr error
	answered := 0
	for _, r := range b.pick() {
		resp, err := r.client.ListSessions(ctx, in, opts...)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		answered++
		out.Sessions = append(out.Sessions, resp.GetSessions()...)
	}
	if answered == 0 && firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// CancelExecution implements SandboxServiceClient: on the replica that
// holds the session, or, for one this gateway has not placed (its run was
// started through another gateway), on the best healthy replica, which
// stops the run or names its holder (SessionElsewhere, which Router
// follows).
func (b *Balancer) CancelExecution(ctx context.Context, in *sandboxv1.CancelExecutionRequest, opts ...grpc.CallOption) (*sandboxv1.CancelExecutionResponse, error) {
	if r, lost := b.route(in.GetSessionId()); lost == nil {
		resp, err := r.client.CancelExecution(ctx, in, opts...)
		if status.Code(err) != codes.Unavailable {
			return resp, err
		}
	}
	last := status.Error(codes.Unavailable, "no sandboxd replica is reachable")
	for _, r := range b.pick() {
		resp, err := r.client.CancelExecution(ctx, in, opts...)
		if status.Code(err) != codes.Unavailable {
			return resp, err
		}
		last = err
	}
	return nil, last
}
