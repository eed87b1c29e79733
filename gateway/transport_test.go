package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/codeexec/codeexec/gateway/internal/mcpfix"
	"github.com/codeexec/codeexec/gateway/internal/runpython"
	"github.com/codeexec/codeexec/gateway/internal/sessions"
)

// waitFor polls cond for up to five seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestHTTPSessions drives the streamable HTTP handler with mcp-go's HTTP
// client: each MCP session gets its own sandbox session, labelled with the
// MCP session ID, and closing a client (DELETE) destroys it.
func TestHTTPSessions(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close)

	newClient := func() *client.Client {
		c, err := client.NewStreamableHttpClient(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		initialize(t, c)
		t.Cleanup(func() { _ = c.Close() })
		if c.GetSessionId() == "" {
			t.Fatalf("no MCP session ID; protocol %q", c.ProtocolVersion())
		}
		return c
	}
	c1, c2 := newClient(), newClient()
	for _, c := range []*client.Client{c1, c2, c1} {
		res := call(t, c, ToolName, map[string]any{"code": "hello"})
		if got := textOf(t, res); got != "hello" || res.IsError {
			t.Fatalf("result = %q (isError %v), want hello", got, res.IsError)
		}
	}
	created, _, _ := f.snapshot()
	if len(created) != 2 {
		t.Fatalf("created %d sandbox sessions for two HTTP clients, want 2", len(created))
	}
	labels := map[string]bool{}
	for _, c := range created {
		labels[c.GetLabels()[sessions.LabelMCPSession]] = true
	}
	if !labels[c1.GetSessionId()] || !labels[c2.GetSessionId()] {
		t.Errorf("sandbox session labels %v, want the MCP session IDs %q and %q", labels, c1.GetSessionId(), c2.GetSessionId())
	}

	// Unknown tools are tool results over HTTP too.
	res := call(t, c2, "nope", map[string]any{"code": "x"})
	if got := textOf(t, res); !res.IsError || got != "status: error\nUnknown tool: nope" {
		t.Errorf("unknown tool over HTTP = %q (isError %v)", got, res.IsError)
	}

	ended := c1.GetSessionId()
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the closed client's sandbox session to be destroyed", func() bool { return f.liveCount() == 1 })
	// The ended session's ID is refused from then on, as the MCP
	// specification asks; before, it started a new sandbox session.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader(
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"x"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(server.HeaderKeySessionID, ended)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a call with the ended session's ID got %d, want 404", resp.StatusCode)
	}
	if created, _, _ := f.snapshot(); len(created) != 2 {
		t.Errorf("%d sandbox sessions were created, want the 2 of the clients", len(created))
	}
	if res := call(t, c2, ToolName, map[string]any{"code": "still here"}); res.IsError {
		t.Errorf("the other client broke: %s", textOf(t, res))
	}
}

// TestStdio serves the gateway over a pipe pair with mcp-go's stdio client
// transport: one session, destroyed when the input ends.
func TestStdio(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{OutputMode: "toon"})
	serverIn, clientOut := io.Pipe()
	clientIn, serverOut := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- g.ServeStdio(context.Background(), serverIn, serverOut) }()

	c := client.NewClient(transport.NewIO(clientIn, clientOut, io.NopCloser(eofReader{})))
	initialize(t, c)
	for range 2 {
		res := call(t, c, ToolName, map[string]any{"code": "hi"})
		if got, want := textOf(t, res), "```toon\nstatus: success\nsummary: Success\nexitCode: 0\nstdout[1]: hi\n```"; got != want {
			t.Errorf("text = %q, want %q", got, want)
		}
	}
	list, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil || len(list.Tools) != 1 {
		t.Errorf("tools/list over stdio: %v %+v", err, list)
	}
	if created, _, _ := f.snapshot(); len(created) != 1 {
		t.Errorf("created %d sandbox sessions over stdio, want 1", len(created))
	}

	// Closing the client's end ends the input, which ends the session.
	_ = clientOut.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeStdio did not return after its input ended")
	}
	_ = c.Close()
	_ = serverOut.Close()
	if f.liveCount() != 0 {
		t.Errorf("%d sandbox sessions alive after stdio ended, want 0", f.liveCount())
	}
}

// eofReader stands in for the stderr of a process that writes nothing.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// TestHTTPClientCannotForgeUnknownTool checks that the header the unknown-tool
// reroute uses cannot be set by a client.
func TestHTTPClientCannotForgeUnknownTool(t *testing.T) {
	t.Parallel()
	g, _ := newTestGateway(t, Config{})
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close)
	c, err := client.NewStreamableHttpClient(srv.URL, transport.WithHTTPHeaders(map[string]string{mcpfix.UnknownToolHeader: "forged"}))
	if err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	t.Cleanup(func() { _ = c.Close() })
	res := call(t, c, ToolName, map[string]any{"code": "real"})
	if got := textOf(t, res); got != "real" || res.IsError {
		t.Errorf("result = %q (isError %v), want the code to run", got, res.IsError)
	}
}

// TestHTTPSessionFromEarlierProcess covers a client that keeps its session
// ID across a gateway restart: its call runs, and says the state is gone.
func TestHTTPSessionFromEarlierProcess(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close)
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(x)"}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", "mcp-session-0b7e2a52-6c1f-4c1e-9a35-3f2f4f3f0c11")
	req.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20250618)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(got), runpython.NoticeSessionLost) {
		t.Errorf("response %d %s lacks the session-lost notice", resp.StatusCode, got)
	}
	if created, _, _ := f.snapshot(); len(created) != 1 || created[0].GetLabels()[sessions.LabelMCPSession] != "mcp-session-0b7e2a52-6c1f-4c1e-9a35-3f2f4f3f0c11" {
		t.Errorf("created = %v", created)
	}
}

// TestHTTPIdleSessionsAreEnded: a client that vanishes without DELETE has
// its sandbox session destroyed once it has been idle for the timeout.
func TestHTTPIdleSessionsAreEnded(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{SessionIdleTimeout: 200 * time.Millisecond})
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close)
	c, err := client.NewStreamableHttpClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	if res := call(t, c, ToolName, map[string]any{"code": "hello"}); res.IsError {
		t.Fatalf("call failed: %s", textOf(t, res))
	}
	if f.liveCount() != 1 {
		t.Fatalf("live sandbox sessions = %d, want 1", f.liveCount())
	}
	// No Close: the client just goes quiet.
	waitFor(t, "the idle session's sandbox session to be destroyed", func() bool { return f.liveCount() == 0 })
}
