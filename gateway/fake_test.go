package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/grpctest"
	"github.com/codeexec/codeexec/services/requestid"
)

// fakeSandbox is a hand-written SandboxService. Each Execute is answered by
// respond, which sees the request and returns the events to stream and an
// optional error to end the stream with.
type fakeSandbox struct {
	sandboxv1.UnimplementedSandboxServiceServer

	mu         sync.Mutex
	next       int
	live       map[string]*sandboxv1.CreateSessionRequest
	created    []*sandboxv1.CreateSessionRequest
	destroyed  []string
	execs      []*sandboxv1.ExecuteRequest
	requestIDs []string
	respond    func(*sandboxv1.ExecuteRequest) ([]*sandboxv1.ExecuteResponse, error)
	createErr  error
	// destroyErr, when set, answers every DestroySession.
	destroyErr error
	generation uint64
}

func newFakeSandbox() *fakeSandbox {
	return &fakeSandbox{live: map[string]*sandboxv1.CreateSessionRequest{}}
}

func (f *fakeSandbox) CreateSession(_ context.Context, req *sandboxv1.CreateSessionRequest) (*sandboxv1.CreateSessionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.createErr != nil {
		return nil, f.createErr
	}
	f.next++
	id := fmt.Sprintf("sbx-%d", f.next)
	f.live[id] = req
	f.created = append(f.created, req)
	return &sandboxv1.CreateSessionResponse{Session: &sandboxv1.Session{Id: id, Tenant: req.GetTenant(), Labels: req.GetLabels()}}, nil
}

func (f *fakeSandbox) DestroySession(_ context.Context, req *sandboxv1.DestroySessionRequest) (*sandboxv1.DestroySessionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.destroyErr != nil {
		return nil, f.destroyErr
	}
	if _, ok := f.live[req.GetSessionId()]; !ok {
		return nil, status.Error(codes.NotFound, "no such session")
	}
	delete(f.live, req.GetSessionId())
	f.destroyed = append(f.destroyed, req.GetSessionId())
	return &sandboxv1.DestroySessionResponse{}, nil
}

func (f *fakeSandbox) Execute(req *sandboxv1.ExecuteRequest, stream grpc.ServerStreamingServer[sandboxv1.ExecuteResponse]) error {
	f.mu.Lock()
	_, ok := f.live[req.GetSessionId()]
	f.execs = append(f.execs, proto.Clone(req).(*sandboxv1.ExecuteRequest))
	if md, ok := metadata.FromIncomingContext(stream.Context()); ok {
		f.requestIDs = append(f.requestIDs, strings.Join(md.Get(requestid.MetadataKey), ","))
	}
	respond, gen := f.respond, f.generation
	f.mu.Unlock()
	if !ok {
		return status.Errorf(codes.NotFound, "session %q not found", req.GetSessionId())
	}
	if respond == nil {
		respond = echo
	}
	events, err := respond(req)
	for _, ev := range events {
		if r := ev.GetResult(); r != nil && r.GetSession() == nil {
			r.Session = &sandboxv1.Session{Id: req.GetSessionId(), Generation: gen}
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	return err
}

// forget drops every session, as a restarted sandboxd would.
func (f *fakeSandbox) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.live)
}

func (f *fakeSandbox) snapshot() (created []*sandboxv1.CreateSessionRequest, destroyed []string, execs []*sandboxv1.ExecuteRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*sandboxv1.CreateSessionRequest(nil), f.created...),
		append([]string(nil), f.destroyed...),
		append([]*sandboxv1.ExecuteRequest(nil), f.execs...)
}

func (f *fakeSandbox) liveCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live)
}

// echo prints the code back and succeeds.
func echo(req *sandboxv1.ExecuteRequest) ([]*sandboxv1.ExecuteResponse, error) {
	return []*sandboxv1.ExecuteResponse{out(sandboxv1.Stream_STREAM_STDOUT, req.GetCode()+"\n"), done(okRes())}, nil
}

func out(s sandboxv1.Stream, text string) *sandboxv1.ExecuteResponse {
	return &sandboxv1.ExecuteResponse{Event: &sandboxv1.ExecuteResponse_Output{Output: &sandboxv1.OutputChunk{Stream: s, Text: text}}}
}

func done(r *sandboxv1.ExecResult) *sandboxv1.ExecuteResponse {
	return &sandboxv1.ExecuteResponse{Event: &sandboxv1.ExecuteResponse_Result{Result: r}}
}

func okRes() *sandboxv1.ExecResult {
	return &sandboxv1.ExecResult{Status: sandboxv1.ExecStatus_EXEC_STATUS_OK}
}

// script returns a fixed response, whatever the request.
func script(events []*sandboxv1.ExecuteResponse, err error) func(*sandboxv1.ExecuteRequest) ([]*sandboxv1.ExecuteResponse, error) {
	return func(*sandboxv1.ExecuteRequest) ([]*sandboxv1.ExecuteResponse, error) {
		cp := make([]*sandboxv1.ExecuteResponse, len(events))
		for i, ev := range events {
			cp[i] = proto.Clone(ev).(*sandboxv1.ExecuteResponse)
		}
		return cp, err
	}
}

// startFake serves f on the suite's gRPC server over bufconn and returns
// a client for it.
func startFake(t *testing.T, f *fakeSandbox) sandboxv1.SandboxServiceClient {
	t.Helper()
	conn := grpctest.Start(t, func(g *grpc.Server) { sandboxv1.RegisterSandboxServiceServer(g, f) })
	return sandboxv1.NewSandboxServiceClient(conn)
}

// newTestGateway starts a fake sandbox and a gateway in front of it.
func newTestGateway(t *testing.T, cfg Config) (*Gateway, *fakeSandbox) {
	t.Helper()
	f := newFakeSandbox()
	g, err := New(cfg, startFake(t, f), slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	return g, f
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// connect starts an initialised in-process MCP client.
func connect(t *testing.T, g *Gateway) *client.Client {
	t.Helper()
	c, err := client.NewInProcessClient(g.MCPServer())
	if err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func initialize(t *testing.T, c *client.Client) *mcp.InitializeResult {
	t.Helper()
	if err := c.Start(t.Context()); err != nil {
		t.Fatalf("client start: %v", err)
	}
	// The latest session-based revision: these tests pin the results an
	// existing (pre-2026-07-28) client gets, byte for byte. Modern clients
	// are tested on their own.
	res, err := c.Initialize(t.Context(), mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: mcp.LATEST_LEGACY_PROTOCOL_VERSION,
		ClientInfo:      mcp.Implementation{Name: "gateway-test", Version: "1"},
	}})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return res
}

func call(t *testing.T, c *client.Client, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := c.CallTool(t.Context(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// textOf returns the single text content of a result.
func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("got %d contents, want 1: %+v", len(res.Content), res.Content)
	}
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want TextContent", res.Content[0])
	}
	return tc.Text
}

// structured returns structuredContent as a generic JSON value.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	return m
}

func jsonMap(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return m
}

func (f *fakeSandbox) setRespond(fn func(*sandboxv1.ExecuteRequest) ([]*sandboxv1.ExecuteResponse, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.respond = fn
}

func (f *fakeSandbox) setGeneration(g uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.generation = g
}

func (f *fakeSandbox) setCreateErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.createErr = err
}
