package route

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// fakeSandboxd is one replica over real gRPC on loopback.
type fakeSandboxd struct {
	sandboxv1.UnimplementedSandboxServiceServer
	addr string
	srv  *grpc.Server

	block chan struct{} // when set, Execute waits on it before answering
	// adopt makes Execute take any session it does not hold, as sandboxd
	// takes a durable session over from the session store.
	adopt bool
	// elsewhere names, by session, the replica that Execute and
	// DestroySession send the caller to (SessionElsewhere), so many times.
	elsewhere map[string]redirect

	mu       sync.Mutex
	n        int
	sessions map[string]bool
	execs    []string
}

func startFake(t *testing.T) *fakeSandboxd {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSandboxd{addr: lis.Addr().String(), srv: grpc.NewServer(), sessions: map[string]bool{}, elsewhere: map[string]redirect{}}
	sandboxv1.RegisterSandboxServiceServer(f.srv, f)
	healthpb.RegisterHealthServer(f.srv, health.NewServer())
	go func() { _ = f.srv.Serve(lis) }()
	t.Cleanup(f.srv.Stop)
	return f
}

func (f *fakeSandboxd) CreateSession(context.Context, *sandboxv1.CreateSessionRequest) (*sandboxv1.CreateSessionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	id := fmt.Sprintf("%s#%d", f.addr, f.n)
	f.sessions[id] = true
	return &sandboxv1.CreateSessionResponse{Session: &sandboxv1.Session{Id: id}}, nil
}

// redirect sends a caller to addr, times more times.
type redirect struct {
	addr  string
	times int
}

// redirected returns the SessionElsewhere answer for session id, if any
// is due. f.mu is held.
func (f *fakeSandboxd) redirected(id string) error {
	r, ok := f.elsewhere[id]
	if !ok || r.times == 0 {
		return nil
	}
	r.times--
	f.elsewhere[id] = r
	st, _ := status.New(codes.FailedPrecondition, "the session is live on replica "+r.addr).
		WithDetails(&sandboxv1.SessionElsewhere{Replica: r.addr, Address: r.addr})
	return st.Err()
}

func (f *fakeSandboxd) Execute(req *sandboxv1.ExecuteRequest, stream grpc.ServerStreamingServer[sandboxv1.ExecuteResponse]) error {
	f.mu.Lock()
	if err := f.redirected(req.GetSessionId()); err != nil {
		f.execs = append(f.execs, req.GetSessionId())
		f.mu.Unlock()
		return err
	}
	known := f.sessions[req.GetSessionId()] || f.adopt
	f.sessions[req.GetSessionId()] = known
	f.execs = append(f.execs, req.GetSessionId())
	f.mu.Unlock()
	if !known {
		return status.Error(codes.NotFound, "no such session")
	}
	if f.block != nil {
		select {
		case <-f.block:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
	_ = stream.Send(&sandboxv1.ExecuteResponse{Event: &sandboxv1.ExecuteResponse_Output{Output: &sandboxv1.OutputChunk{Text: f.addr}}})
	return stream.Send(&sandboxv1.ExecuteResponse{Event: &sandboxv1.ExecuteResponse_Result{Result: &sandboxv1.ExecResult{}}})
}

func (f *fakeSandboxd) DestroySession(_ context.Context, req *sandboxv1.DestroySessionRequest) (*sandboxv1.DestroySessionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.redirected(req.GetSessionId()); err != nil {
		return nil, err
	}
	delete(f.sessions, req.GetSessionId())
	return &sandboxv1.DestroySessionResponse{}, nil
}

func (f *fakeSandboxd) ListSessions(context.Context, *sandboxv1.ListSessionsRequest) (*sandboxv1.ListSessionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &sandboxv1.ListSessionsResponse{}
	for id := range f.sessions {
		out.Sessions = append(out.Sessions, &sandboxv1.Session{Id: id})
	}
	return out, nil
}

func dialTest(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

func newBalancer(t *testing.T, resolve func(context.Context) ([]string, error), policy Policy) *Balancer {
	t.Helper()
	b, err := NewBalancer(t.Context(), Config{Resolve: resolve, Dial: dialTest, Policy: policy, Interval: time.Hour}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// run executes on a session and returns the replica that answered.
func run(ctx context.Context, b *Balancer, id string) (string, error) {
	stream, err := b.Execute(ctx, &sandboxv1.ExecuteRequest{SessionId: id, Code: "pass"})
	if err != nil {
		return "", err
	}
	var out string
	for {
		m, err := stream.Recv()
		if err != nil {
			return "", err
		}
		if o := m.GetOutput(); o != nil {
			out += o.GetText()
		}
		if m.GetResult() != nil {
			return out, nil
		}
	}
}

func create(t *testing.T, b *Balancer) string {
	t.Helper()
	resp, err := b.CreateSession(t.Context(), &sandboxv1.CreateSessionRequest{})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return resp.GetSession().GetId()
}
