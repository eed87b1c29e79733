package grpctest_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/grpctest"
	"github.com/codeexec/codeexec/services/requestid"
)

// idSandbox answers GetSession with the request ID its handler sees.
type idSandbox struct {
	sandboxv1.UnimplementedSandboxServiceServer
}

func (idSandbox) GetSession(ctx context.Context, _ *sandboxv1.GetSessionRequest) (*sandboxv1.GetSessionResponse, error) {
	return &sandboxv1.GetSessionResponse{Session: &sandboxv1.Session{Id: requestid.From(ctx)}}, nil
}

// syncBuffer is a log destination that the server's goroutines may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The harness's server runs the suite's interceptors: the request ID
// crosses the hop, calls are logged and counted, and health answers.
func TestInterceptorsRun(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	s := grpctest.New(t, grpctest.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	sandboxv1.RegisterSandboxServiceServer(s.Server.GRPC, idSandbox{})
	s.Start()
	c := sandboxv1.NewSandboxServiceClient(s.Conn)

	resp, err := c.GetSession(requestid.With(t.Context(), "req-42"), &sandboxv1.GetSessionRequest{SessionId: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetSession().GetId(); got != "req-42" {
		t.Errorf("the handler saw request ID %q, want req-42", got)
	}
	_, err = c.ListSessions(t.Context(), &sandboxv1.ListSessionsRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("ListSessions = %v, want Unimplemented", err)
	}
	for _, want := range []string{"grpc.method=/codeexec.sandbox.v1.SandboxService/GetSession", "request.id=req-42", "grpc.code=Unimplemented"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the call log lacks %q:\n%s", want, logs.String())
		}
	}
	mfs, err := s.Server.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	handled := 0
	for _, mf := range mfs {
		if mf.GetName() == "grpc_server_handled_total" {
			handled = len(mf.GetMetric())
		}
	}
	if handled != 2 {
		t.Errorf("grpc_server_handled_total has %d series, want 2 (one per method called)", handled)
	}
	h, err := healthpb.NewHealthClient(s.Conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health = %v, %v; want SERVING", h, err)
	}
}

// Start is the short form for tests that need only a connection.
func TestStart(t *testing.T) {
	t.Parallel()
	conn := grpctest.Start(t, func(g *grpc.Server) { sandboxv1.RegisterSandboxServiceServer(g, idSandbox{}) })
	resp, err := sandboxv1.NewSandboxServiceClient(conn).GetSession(t.Context(), &sandboxv1.GetSessionRequest{})
	if err != nil || resp.GetSession().GetId() == "" {
		t.Errorf("GetSession = %v, %v; want a request ID made by the server's interceptor", resp, err)
	}
}
