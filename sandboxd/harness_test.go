package sandboxd_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/services/grpctest"
)

// fakeDiscovery serves one server, "demo", whose tool "echo" returns its
// text argument.
type fakeDiscovery struct {
	discoveryv1.UnimplementedDiscoveryServiceServer
	mu    sync.Mutex
	calls []string
	// gate, when set, holds each ListServers call (one per exec) until a
	// value is sent on it, in the order the calls came; waiting counts
	// the calls it holds.
	gate    chan struct{}
	waiting int
	// slow, when set, is how long each CallTool takes; inFlight and
	// mostInFlight count the CallTools under way, now and at most.
	slow                   time.Duration
	inFlight, mostInFlight int
	// hold, when set, keeps each CallTool until it is closed.
	hold chan struct{}
}

func (f *fakeDiscovery) ListServers(ctx context.Context, _ *discoveryv1.ListServersRequest) (*discoveryv1.ListServersResponse, error) {
	f.mu.Lock()
	gate := f.gate
	if gate != nil {
		f.waiting++
	}
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return &discoveryv1.ListServersResponse{Servers: []*discoveryv1.Server{{Name: "demo", Alias: "demo", Description: "a demo server"}}}, nil
}

func (f *fakeDiscovery) ListTools(_ context.Context, req *discoveryv1.ListToolsRequest) (*discoveryv1.ListToolsResponse, error) {
	if req.GetServer() != "demo" {
		return nil, status.Errorf(codes.NotFound, "unknown server %q", req.GetServer())
	}
	return &discoveryv1.ListToolsResponse{
		Server: &discoveryv1.Server{Name: "demo", Alias: "demo"},
		Tools:  []*discoveryv1.Tool{{Name: "echo", Alias: "echo", Description: "Echo text.", InputSchemaJson: `{"type":"object","properties":{"text":{"type":"string"}}}`}},
	}, nil
}

func (f *fakeDiscovery) CallTool(ctx context.Context, req *discoveryv1.CallToolRequest) (*discoveryv1.CallToolResponse, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req.GetServer()+"/"+req.GetTool())
	f.inFlight++
	f.mostInFlight = max(f.mostInFlight, f.inFlight)
	slow, hold := f.slow, f.hold
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	if slow > 0 {
		select {
		case <-time.After(slow):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	var args struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal([]byte(req.GetArgumentsJson()), &args)
	out, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": args.Text}}})
	return &discoveryv1.CallToolResponse{ResultJson: string(out)}, nil
}

func newService(t *testing.T, mutate func(*sandboxd.Config)) (sandboxv1.SandboxServiceClient, *fakeDiscovery) {
	t.Helper()
	c, fd, _ := newServiceWithMetrics(t, mutate)
	return c, fd
}

func newServiceWithMetrics(t *testing.T, mutate func(*sandboxd.Config)) (sandboxv1.SandboxServiceClient, *fakeDiscovery, *prometheus.Registry) {
	t.Helper()
	return newServiceWithDeps(t, mutate, nil)
}

// newServiceWithDeps is newServiceWithMetrics whose dependencies deps
// completes (memoryd's clients, for instance).
func newServiceWithDeps(t testing.TB, mutate func(*sandboxd.Config), deps func(*sandboxd.Deps)) (sandboxv1.SandboxServiceClient, *fakeDiscovery, *prometheus.Registry) {
	t.Helper()
	needsSandboxes(t)
	logger := slog.New(slog.DiscardHandler)
	cfg := sandboxd.DefaultConfig()
	cfg.PoolSize = 1
	cfg.Env = sandboxd.HostEnv // the host's /usr, whatever environment is built here
	if mutate != nil {
		mutate(&cfg)
	}
	// Registered before the server's own cleanup, so it runs after the
	// server has stopped.
	var svc *sandboxd.Service
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		if svc == nil {
			return
		}
		if err := svc.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	ip := grpctest.New(t, grpctest.Options{Logger: logger})
	fd := &fakeDiscovery{}
	discoveryv1.RegisterDiscoveryServiceServer(ip.Server.GRPC, fd)
	reg := prometheus.NewRegistry()
	var err error
	d := sandboxd.Deps{Discovery: discoveryv1.NewDiscoveryServiceClient(ip.Conn), Registry: reg}
	if deps != nil {
		deps(&d)
	}
	svc, err = sandboxd.New(ctx, cfg, d, logger)
	if err != nil {
		t.Fatalf("sandboxd.New: %v", err)
	}
	svc.Register(ip.Server.GRPC)
	ip.Start()
	return sandboxv1.NewSandboxServiceClient(ip.Conn), fd, reg
}

// needsSandboxes skips t under -short: sandboxd's own tests run real
// sandboxes, which need bubblewrap (or podman or docker), and take
// minutes. The session, lease, capacity and sandbox packages test the
// same logic without them, in the fast tier.
func needsSandboxes(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real sandboxes, which need bubblewrap (or podman or docker): run without -short")
	}
}

// gauge reads one unlabelled metric from reg.
func gauge(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// execResult collects one Execute stream.
type execResult struct {
	stdout, stderr string
	chunksBefore   int
	result         *sandboxv1.ExecResult
}

func execute(ctx context.Context, c sandboxv1.SandboxServiceClient, req *sandboxv1.ExecuteRequest) (*execResult, error) {
	stream, err := c.Execute(ctx, req)
	if err != nil {
		return nil, err
	}
	r := &execResult{}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return r, nil
		}
		if err != nil {
			return r, err
		}
		if o := ev.GetOutput(); o != nil {
			if r.result != nil {
				return r, status.Error(codes.Internal, "output after the result")
			}
			r.chunksBefore++
			if o.GetStream() == sandboxv1.Stream_STREAM_STDERR {
				r.stderr += o.GetText()
			} else {
				r.stdout += o.GetText()
			}
		}
		if res := ev.GetResult(); res != nil {
			r.result = res
		}
	}
}

func create(t *testing.T, c sandboxv1.SandboxServiceClient, tenant string) string {
	t.Helper()
	resp, err := c.CreateSession(t.Context(), &sandboxv1.CreateSessionRequest{Tenant: tenant, Labels: map[string]string{"who": t.Name()}})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return resp.GetSession().GetId()
}
