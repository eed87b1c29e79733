package route

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// MaxHops bounds how often one call follows SessionElsewhere to the
// replica that holds its session (a session moves at most once per call,
// so two hops mean the routing is broken).
const MaxHops = 2

// holderWait bounds how long a call waits for the lease of a session's
// unreachable holder to lapse (sandboxd's lease is 6s, plus 1s for clock
// skew), asking again every holderRetry.
const (
	holderWait  = 15 * time.Second
	holderRetry = 500 * time.Millisecond
)

// Router is a SandboxServiceClient that sends Execute, CancelExecution,
// DestroySession and AnswerApproval to the replica that holds their
// session: it asks its base client (one replica, or a Balancer) and
// follows a SessionElsewhere answer to the replica it names. Every other
// call goes to the base as it is.
type Router struct {
	sandboxv1.SandboxServiceClient
	// others reaches the replicas SessionElsewhere names; nil follows none.
	others *ByAddress
	// holderWait and holderRetry are the constants above but in tests.
	holderWait, holderRetry time.Duration
}

var _ sandboxv1.SandboxServiceClient = (*Router)(nil)

// NewRouter returns a Router over base. dial connects to a replica that a
// SessionElsewhere answer names (another replica of this deployment, or
// the sandboxd of another codeexec process on this machine), once per
// address; nil follows no such answer.
func NewRouter(base sandboxv1.SandboxServiceClient, dial func(addr string) (*grpc.ClientConn, error)) *Router {
	r := &Router{SandboxServiceClient: base, holderWait: holderWait, holderRetry: holderRetry}
	if dial != nil {
		r.others = NewByAddress(dial)
	}
	return r
}

// Close closes the connections to the replicas SessionElsewhere named.
// The base client is the caller's.
func (r *Router) Close() {
	if r.others != nil {
		r.others.Close()
	}
}

// Execute opens the call's stream on the replica that holds its session
// and reads the stream's first message there, so that a SessionElsewhere
// answer, which comes before any output, can be followed. When the
// holder named does not answer, its lease lapses within seconds and any
// replica takes the session over from its checkpoint: the base is asked
// again, for up to holderWait.
func (r *Router) Execute(ctx context.Context, in *sandboxv1.ExecuteRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[sandboxv1.ExecuteResponse], error) {
	client, holder := r.SandboxServiceClient, ""
	var holderGone time.Time
	for hop := 0; ; hop++ {
		stream, err := open(ctx, client, in, opts...)
		if err == nil {
			return stream, nil
		}
		if holder != "" && status.Code(err) == codes.Unavailable {
			if holderGone.IsZero() {
				holderGone = time.Now()
			}
			if time.Since(holderGone) >= r.holderWait {
				return nil, status.Errorf(codes.Unavailable, "the session is live on the sandbox replica at %s, which this gateway cannot reach, and its lease has not lapsed after %s: %v", holder, r.holderWait, status.Convert(err).Message())
			}
			select {
			case <-time.After(r.holderRetry):
			case <-ctx.Done():
				return nil, err
			}
			client, holder, hop = r.SandboxServiceClient, "", -1
			continue
		}
		addr := ElsewhereAddress(err)
		if addr == "" || hop >= MaxHops || r.others == nil {
			return nil, err
		}
		c, derr := r.others.Client(addr)
		if derr != nil {
			return nil, status.Errorf(codes.Unavailable, "the session is live on the sandbox replica at %s, which this gateway cannot reach: %v", addr, derr)
		}
		client, holder = c, addr
	}
}

// open makes one Execute call on client and reads its first message. The
// stream it returns gives that message again first; the end of the stream
// before any message is a stream too, which says so when read.
func open(ctx context.Context, client sandboxv1.SandboxServiceClient, in *sandboxv1.ExecuteRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[sandboxv1.ExecuteResponse], error) {
	stream, err := client.Execute(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	first, err := stream.Recv()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return &replay{ServerStreamingClient: stream, first: first, firstErr: err}, nil
}

// replay is a stream whose first message was read already.
type replay struct {
	grpc.ServerStreamingClient[sandboxv1.ExecuteResponse]
	first    *sandboxv1.ExecuteResponse
	firstErr error
	replayed bool
}

func (s *replay) Recv() (*sandboxv1.ExecuteResponse, error) {
	if !s.replayed {
		s.replayed = true
		return s.first, s.firstErr
	}
	return s.ServerStreamingClient.Recv()
}

// DestroySession ends a session on the replica that holds it: a session
// that moved to another replica is followed there, since ending it only
// in the store would leave its sandbox running.
func (r *Router) DestroySession(ctx context.Context, in *sandboxv1.DestroySessionRequest, opts ...grpc.CallOption) (*sandboxv1.DestroySessionResponse, error) {
	client := r.SandboxServiceClient
	for hop := 0; ; hop++ {
		resp, err := client.DestroySession(ctx, in, opts...)
		addr := ElsewhereAddress(err)
		if addr == "" || hop >= MaxHops || r.others == nil {
			return resp, err
		}
		if client, err = r.others.Client(addr); err != nil {
			return nil, fmt.Errorf("the session is live on the sandbox replica at %s, which this gateway cannot reach: %w", addr, err)
		}
	}
}

// AnswerApproval answers on the replica that holds the session, following
// SessionElsewhere as DestroySession does: the run that asked is there.
func (r *Router) AnswerApproval(ctx context.Context, in *sandboxv1.AnswerApprovalRequest, opts ...grpc.CallOption) (*sandboxv1.AnswerApprovalResponse, error) {
	client := r.SandboxServiceClient
	for hop := 0; ; hop++ {
		resp, err := client.AnswerApproval(ctx, in, opts...)
		addr := ElsewhereAddress(err)
		if addr == "" || hop >= MaxHops || r.others == nil {
			return resp, err
		}
		if client, err = r.others.Client(addr); err != nil {
			return nil, fmt.Errorf("the session is live on the sandbox replica at %s, which this gateway cannot reach: %w", addr, err)
		}
	}
}

// CancelExecution stops a session's run in flight on the replica that
// holds it, following SessionElsewhere as DestroySession does.
func (r *Router) CancelExecution(ctx context.Context, in *sandboxv1.CancelExecutionRequest, opts ...grpc.CallOption) (*sandboxv1.CancelExecutionResponse, error) {
	client := r.SandboxServiceClient
	for hop := 0; ; hop++ {
		resp, err := client.CancelExecution(ctx, in, opts...)
		addr := ElsewhereAddress(err)
		if addr == "" || hop >= MaxHops || r.others == nil {
			return resp, err
		}
		if client, err = r.others.Client(addr); err != nil {
			return nil, fmt.Errorf("the session is live on the sandbox replica at %s, which this gateway cannot reach: %w", addr, err)
		}
	}
}

// ElsewhereAddress returns the address of the replica a SessionElsewhere
// error names, or "".
func ElsewhereAddress(err error) string {
	if status.Code(err) != codes.FailedPrecondition {
		return ""
	}
	for _, d := range status.Convert(err).Details() {
		if se, ok := d.(*sandboxv1.SessionElsewhere); ok {
			return se.GetAddress()
		}
	}
	return ""
}

// ByAddress keeps one connection per replica address, for the replicas a
// SessionElsewhere answer names.
type ByAddress struct {
	dial  func(addr string) (*grpc.ClientConn, error)
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// NewByAddress returns an empty set that dials with dial.
func NewByAddress(dial func(addr string) (*grpc.ClientConn, error)) *ByAddress {
	return &ByAddress{dial: dial, conns: map[string]*grpc.ClientConn{}}
}

// Client returns a client of the replica at addr, connecting on first use.
func (b *ByAddress) Client(addr string) (sandboxv1.SandboxServiceClient, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.conns[addr]; ok {
		return sandboxv1.NewSandboxServiceClient(c), nil
	}
	c, err := b.dial(addr)
	if err != nil {
		return nil, err
	}
	b.conns[addr] = c
	return sandboxv1.NewSandboxServiceClient(c), nil
}

// Close closes every connection.
func (b *ByAddress) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for addr, c := range b.conns {
		_ = c.Close()
		delete(b.conns, addr)
	}
}
