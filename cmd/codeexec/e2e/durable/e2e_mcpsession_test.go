package durable

// End-to-end tests of MCP sessions over HTTP (the session-based revisions,
// Mcp-Session-Id) across restarts of `codeexec serve --http`: a client
// that keeps its session ID continues its sandbox session, restored from
// its checkpoint, within its own tenant only; a session its client ended
// stays ended.

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// serveHTTP starts `codeexec serve --http` with env and returns it and its
// base URL once it answers.
func serveHTTP(t *testing.T, env []string) (*exec.Cmd, string) {
	t.Helper()
	addr := harness.FreeAddr(t)
	cmd, _ := harness.StartCommand(t, env, "serve", "--http", addr)
	base := "http://" + addr
	harness.WaitHTTP(t, base+"/healthz")
	return cmd, base
}

// sessionClient is an initialised session-based MCP client of base, with
// headers on every request.
func sessionClient(t *testing.T, base string, headers map[string]string) *client.Client {
	t.Helper()
	c := harness.HTTPClientWith(t, base, headers)
	if c.GetSessionId() == "" {
		t.Fatalf("no MCP session ID; protocol %q", c.ProtocolVersion())
	}
	return c
}

// resumedClient is a client that goes on with the MCP session id, as one
// does that kept it across the server's restart: no initialize, the same
// Mcp-Session-Id and protocol version on every request.
func resumedClient(t *testing.T, base, id string, headers map[string]string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(base+"/mcp", transport.WithSession(id), transport.WithHTTPHeaders(headers))
	if err != nil {
		t.Fatal(err)
	}
	tr.SetProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	c := client.NewClient(tr, client.WithSession())
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// A session-based client keeps its Mcp-Session-Id across a restart of
// `serve --http` on the same state dir: its variables, function, class
// and import come back, with the restore notice. Another tenant
// presenting the same ID gets a fresh session of its own, and a request
// without credentials is refused.
func TestE2EHTTPMCPSessionSurvivesARestart(t *testing.T) {
	t.Parallel()
	tokens := harness.TokensFile(t, map[string]string{"alice-token": "alice", "bob-token": "bob"})
	extra := harness.StateEnv(t.TempDir())
	extra["CODEEXEC_TOKENS_FILE"] = tokens
	env := harness.BaseEnv(t, extra)
	first, base := serveHTTP(t, env)
	alice := sessionClient(t, base, bearer("alice-token"))
	harness.Code(t, alice, defineAll)
	id := alice.GetSessionId()
	stop(t, first, syscall.SIGTERM)

	_, base = serveHTTP(t, env)
	bob := resumedClient(t, base, id, bearer("bob-token"))
	if got := harness.Joined(harness.Code(t, bob, "print('count' in globals(), 'Box' in globals())").Stdout()); got != "False False" {
		t.Errorf("bob with alice's MCP session ID sees %q, want a fresh session", got)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(count)"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("alice's MCP session ID without credentials: status %d, want 401", resp.StatusCode)
	}

	alice = resumedClient(t, base, id, bearer("alice-token"))
	o := harness.Code(t, alice, checkAll)
	if got := harness.Joined(o.Stdout()); got != wantAll {
		t.Fatalf("alice after the restart: %q, want %q (%s)", got, wantAll, o.Text)
	}
	for _, name := range []string{"restored", "count", "bump", "Box", "box", "fractions"} {
		if !strings.Contains(o.Text, name) {
			t.Errorf("the first result after the restart does not mention %q: %q", name, o.Text)
		}
	}
	if strings.Contains(o.Text, "session lost") {
		t.Errorf("the continued session says it was lost: %q", o.Text)
	}
	if o := harness.Code(t, alice, "print(count)"); harness.Joined(o.Stdout()) != "42" || strings.Contains(o.Text, "restored") {
		t.Errorf("the next call: %q; want 42 and no second report", o.Text)
	}
	if got := harness.Joined(harness.Code(t, bob, "print('count' in globals())").Stdout()); got != "False" {
		t.Errorf("bob's session after alice's came back: %q", got)
	}
}

// An MCP session its client ended (DELETE) stays ended across restarts:
// its ID starts an empty session, whether the DELETE reached the process
// that served the session or one started after it. A session that was not
// ended comes back beside them.
func TestE2EHTTPMCPSessionDeletedStaysEnded(t *testing.T) {
	t.Parallel()
	env := harness.BaseEnv(t, harness.StateEnv(t.TempDir()))
	first, base := serveHTTP(t, env)
	kept, before, after := sessionClient(t, base, nil), sessionClient(t, base, nil), sessionClient(t, base, nil)
	harness.Code(t, kept, "kept = 1")
	harness.Code(t, before, "gone = 2")
	harness.Code(t, after, "gone = 3")
	keptID, beforeID, afterID := kept.GetSessionId(), before.GetSessionId(), after.GetSessionId()
	if err := before.Close(); err != nil { // sends DELETE
		t.Fatal(err)
	}
	stop(t, first, syscall.SIGTERM)

	second, base := serveHTTP(t, env)
	// This process never saw the session it is asked to end.
	if err := resumedClient(t, base, afterID, nil).Close(); err != nil {
		t.Fatal(err)
	}
	stop(t, second, syscall.SIGTERM)

	_, base = serveHTTP(t, env)
	for _, id := range []string{beforeID, afterID} {
		if got := harness.Joined(harness.Code(t, resumedClient(t, base, id, nil), "print('gone' in globals())").Stdout()); got != "False" {
			t.Errorf("the ended MCP session %s after restarts: %q, want an empty session", id, got)
		}
	}
	if o := harness.Code(t, resumedClient(t, base, keptID, nil), "print(kept)"); harness.Joined(o.Stdout()) != "1" {
		t.Errorf("the MCP session that was not ended: %q, want its state back", o.Text)
	}
}

// Two serve processes on one state dir, as behind a balancer: an MCP
// session begun through one continues through the other, in the same
// sandbox session, and back.
func TestE2EHTTPMCPSessionThroughTwoProcesses(t *testing.T) {
	t.Parallel()
	env := harness.BaseEnv(t, harness.StateEnv(t.TempDir()))
	_, a := serveHTTP(t, env)
	_, b := serveHTTP(t, env)
	first := sessionClient(t, a, nil)
	harness.Code(t, first, defineAll)
	clients := []*client.Client{resumedClient(t, b, first.GetSessionId(), nil), first}
	for i, want := range []string{"42", "43", "44"} {
		o := harness.Code(t, clients[i%2], "count = bump(count)\nprint(count)")
		if got := harness.Joined(o.Stdout()); got != want {
			t.Fatalf("call %d through process %d: %q, want %q (%s)", i, i%2, got, want, o.Text)
		}
		if strings.Contains(o.Text, "restored") || strings.Contains(o.Text, "session lost") {
			t.Errorf("call %d: the session moved although its sandbox lived: %q", i, o.Text)
		}
	}
}
