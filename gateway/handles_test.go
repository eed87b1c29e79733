package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/grpctest"
)

// modernCall sends one tools/call as a 2026-07-28 request over HTTP would
// reach the server: per-request protocol info and no MCP session.
func modernCall(t *testing.T, g *Gateway, args map[string]any) map[string]any {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": ToolName, "arguments": args,
			"_meta": map[string]any{mcp.MetaKeyProtocolVersion: mcp.ProtocolVersion20260728, "io.modelcontextprotocol/clientCapabilities": map[string]any{}, mcp.MetaKeyClientInfo: map[string]any{"name": "t", "version": "1"}}}})
	resp := g.MCPServer().HandleMessage(t.Context(), raw)
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			Structured map[string]any `json:"structuredContent"`
			IsError    bool           `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &msg); err != nil || len(msg.Result.Content) != 1 {
		t.Fatalf("response %s: %v", b, err)
	}
	msg.Result.Structured["_text"] = msg.Result.Content[0].Text
	msg.Result.Structured["_isError"] = msg.Result.IsError
	return msg.Result.Structured
}

// Under 2026-07-28 a call without a handle starts a session and returns
// its handle (with one line of text); a call with it continues the same
// sandbox session; an unknown handle is refused saying what to do.
func TestModernRequestsUseHandles(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	first := modernCall(t, g, map[string]any{"code": "a"})
	h, _ := first["session"].(string)
	if h == "" || !strings.Contains(first["_text"].(string), `session: `+h+` (pass session="`+h+`" to continue it)`) {
		t.Fatalf("first call: %v", first)
	}
	again := modernCall(t, g, map[string]any{"code": "b", "session": h})
	if again["session"] != h || strings.Contains(again["_text"].(string), "session:") {
		t.Errorf("continued call: %v; want the handle in structuredContent only", again)
	}
	other := modernCall(t, g, map[string]any{"code": "c"})
	if other["session"] == h || other["session"] == nil {
		t.Errorf("a call without a handle reused session %v", other["session"])
	}
	_, _, execs := f.snapshot()
	if len(execs) != 3 || execs[0].GetSessionId() != h || execs[1].GetSessionId() != h || execs[2].GetSessionId() == h {
		t.Errorf("sandbox sessions of the three calls: %v", execs)
	}
	unknown := modernCall(t, g, map[string]any{"code": "d", "session": "0123456789abcdef0123456789abcdef"})
	if unknown["_isError"] != true || !strings.Contains(unknown["_text"].(string), "unknown session") ||
		!strings.Contains(unknown["_text"].(string), "without a session to start a new one") {
		t.Errorf("unknown handle: %v", unknown)
	}
	if bad := modernCall(t, g, map[string]any{"code": "e", "session": 7}); bad["status"] != "validation_error" {
		t.Errorf("a number as session: %v", bad)
	}
	// A value no handle looks like is refused before sandboxd is asked,
	// and is not handed back as if it were the session's handle.
	bad := modernCall(t, g, map[string]any{"code": "f", "session": "not a handle / at all"})
	if bad["status"] != "validation_error" || bad["session"] != nil || !strings.Contains(bad["_text"].(string), "pass the handle an earlier result gave") {
		t.Errorf("a malformed handle: %v", bad)
	}
	if _, _, after := f.snapshot(); len(after) != len(execs)+1 {
		t.Errorf("%d execs after the unknown and the malformed handle, want %d: only the unknown one reaches sandboxd", len(after), len(execs)+1)
	}
}

// A legacy client's results carry no handle, unless it names a session,
// which it may do to continue one from another connection.
func TestLegacyClientsMayNameASession(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	h, _ := modernCall(t, g, map[string]any{"code": "made by a modern client"})["session"].(string)
	c := connect(t, g)
	res := call(t, c, ToolName, map[string]any{"code": "x"})
	if res.StructuredContent.(map[string]any)["session"] != nil {
		t.Errorf("a legacy result carries a handle: %v", res.StructuredContent)
	}
	res = call(t, c, ToolName, map[string]any{"code": "y", "session": h})
	if got := res.StructuredContent.(map[string]any)["session"]; got != h || res.IsError {
		t.Errorf("a legacy call naming a session: %v (%s)", res.StructuredContent, textOf(t, res))
	}
	_, _, execs := f.snapshot()
	if last := execs[len(execs)-1]; last.GetSessionId() != h {
		t.Errorf("the call ran in %s, want %s", last.GetSessionId(), h)
	}
}

// A session live on another replica is followed there.
func TestSessionElsewhereIsFollowed(t *testing.T) {
	t.Parallel()
	there := newFakeSandbox()
	thereConn := grpctest.Start(t, func(s *grpc.Server) { sandboxv1.RegisterSandboxServiceServer(s, there) })
	here := newFakeSandbox()
	here.respond = func(*sandboxv1.ExecuteRequest) ([]*sandboxv1.ExecuteResponse, error) {
		st, _ := status.New(codes.FailedPrecondition, "the session is live on replica r-2").
			WithDetails(&sandboxv1.SessionElsewhere{Replica: "r-2", Address: "unix:/replica-2.sock"})
		return nil, st.Err()
	}
	hereConn := grpctest.Start(t, func(s *grpc.Server) { sandboxv1.RegisterSandboxServiceServer(s, here) })
	var dialed []string
	g, err := New(Config{DialReplica: func(addr string) (*grpc.ClientConn, error) {
		dialed = append(dialed, addr)
		return thereConn, nil
	}}, sandboxv1.NewSandboxServiceClient(hereConn), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	resp, _ := there.CreateSession(t.Context(), &sandboxv1.CreateSessionRequest{Tenant: "default"})
	h := resp.GetSession().GetId()
	here.live[h] = &sandboxv1.CreateSessionRequest{}
	got := modernCall(t, g, map[string]any{"code": "hello", "session": h})
	if got["_isError"] == true || got["_text"] != "hello" {
		t.Fatalf("call on a session held elsewhere: %v", got)
	}
	if len(dialed) != 1 || dialed[0] != "unix:/replica-2.sock" {
		t.Errorf("dialed %v, want the replica the answer named", dialed)
	}
}

// An MCP session that ends has its sandbox session ended on the replica
// where it is live, which may no longer be the one it started on.
func TestEndedSessionIsDestroyedWhereItIsLive(t *testing.T) {
	t.Parallel()
	there := newFakeSandbox()
	thereConn := grpctest.Start(t, func(s *grpc.Server) { sandboxv1.RegisterSandboxServiceServer(s, there) })
	here := newFakeSandbox()
	hereConn := grpctest.Start(t, func(s *grpc.Server) { sandboxv1.RegisterSandboxServiceServer(s, here) })
	g, err := New(Config{DialReplica: func(addr string) (*grpc.ClientConn, error) {
		if addr != "unix:/replica-2.sock" {
			return nil, fmt.Errorf("dialed %q, want the replica the answer named", addr)
		}
		return thereConn, nil
	}}, sandboxv1.NewSandboxServiceClient(hereConn), nil)
	if err != nil {
		t.Fatal(err)
	}
	call(t, connect(t, g), ToolName, map[string]any{"code": "1"})
	created, _, _ := here.snapshot()
	if len(created) != 1 {
		t.Fatalf("%d sandbox sessions created, want 1", len(created))
	}
	// The session moved: the first replica now names its new holder.
	here.mu.Lock()
	for id := range here.live {
		there.live[id] = &sandboxv1.CreateSessionRequest{}
	}
	st, _ := status.New(codes.FailedPrecondition, "the session is live on replica r-2").
		WithDetails(&sandboxv1.SessionElsewhere{Replica: "r-2", Address: "unix:/replica-2.sock"})
	here.destroyErr = st.Err()
	here.mu.Unlock()
	if err := g.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, destroyed, _ := there.snapshot(); len(destroyed) != 1 {
		t.Errorf("the replica holding the session destroyed %v, want its one session", destroyed)
	}
}
