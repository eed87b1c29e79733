package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/server"

	"github.com/codeexec/codeexec/gateway/internal/params"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

func mustParams(t *testing.T) params.RunPython {
	t.Helper()
	return params.RunPython{Code: "x", Timeout: 5 * time.Second}
}

// blockingRespond makes Execute wait until release is closed; started
// receives one value per call that began.
func blockingRespond(started chan<- struct{}, release <-chan struct{}) func(*sandboxv1.ExecuteRequest) ([]*sandboxv1.ExecuteResponse, error) {
	return func(req *sandboxv1.ExecuteRequest) ([]*sandboxv1.ExecuteResponse, error) {
		started <- struct{}{}
		<-release
		return echo(req)
	}
}

func TestQuotaConcurrentExecs(t *testing.T) {
	t.Parallel()
	srv, _, f := authServer(t, func(c *Config) { c.Quotas.Execs = 1 })
	started, release := make(chan struct{}, 4), make(chan struct{})
	f.setRespond(blockingRespond(started, release))
	a1 := tenantClient(t, srv.URL+"/mcp", "alpha-token")
	a2 := tenantClient(t, srv.URL+"/mcp", "alpha-token")
	b := tenantClient(t, srv.URL+"/mcp", "beta-token")

	var wg sync.WaitGroup
	wg.Go(func() {
		if res := call(t, a1, ToolName, map[string]any{"code": "first"}); res.IsError {
			t.Errorf("the running call failed: %s", textOf(t, res))
		}
	})
	<-started
	res := call(t, a2, ToolName, map[string]any{"code": "second"})
	text := textOf(t, res)
	if !res.IsError || !strings.Contains(text, "limit of 1 concurrent executions") || !strings.Contains(text, "retry when") {
		t.Errorf("second concurrent call = %q (isError %v); want the concurrent-executions quota named, with when to retry", text, res.IsError)
	}
	// Another tenant has its own quota.
	wg.Go(func() {
		if res := call(t, b, ToolName, map[string]any{"code": "beta"}); res.IsError {
			t.Errorf("beta's call failed: %s", textOf(t, res))
		}
	})
	<-started
	close(release)
	wg.Wait()
	if res := call(t, a2, ToolName, map[string]any{"code": "again"}); res.IsError {
		t.Errorf("after the running call ended, the quota still refuses: %s", textOf(t, res))
	}
}

func TestQuotaExecsPerMinute(t *testing.T) {
	t.Parallel()
	g, _ := newTestGateway(t, Config{Quotas: Quotas{ExecsPerMinute: 2}})
	clock := time.Unix(1000, 0)
	g.quota.Now = func() time.Time { return clock }
	c := connect(t, g)
	for i := range 2 {
		if res := call(t, c, ToolName, map[string]any{"code": "x"}); res.IsError {
			t.Fatalf("call %d: %s", i, textOf(t, res))
		}
		clock = clock.Add(10 * time.Second)
	}
	res := call(t, c, ToolName, map[string]any{"code": "x"})
	if text := textOf(t, res); !res.IsError || !strings.Contains(text, "limit of 2 executions per minute") || !strings.Contains(text, "retry in 40 s") {
		t.Errorf("third call = %q; want the per-minute quota and retry in 40 s", text)
	}
	clock = clock.Add(41 * time.Second)
	if res := call(t, c, ToolName, map[string]any{"code": "x"}); res.IsError {
		t.Errorf("after the window moved on: %s", textOf(t, res))
	}
}

func TestQuotaSessions(t *testing.T) {
	t.Parallel()
	srv, _, _ := authServer(t, func(c *Config) { c.Quotas.Sessions = 1 })
	a1 := tenantClient(t, srv.URL+"/mcp", "alpha-token")
	a2 := tenantClient(t, srv.URL+"/mcp", "alpha-token")
	b := tenantClient(t, srv.URL+"/mcp", "beta-token")
	if res := call(t, a1, ToolName, map[string]any{"code": "x"}); res.IsError {
		t.Fatal(textOf(t, res))
	}
	res := call(t, a2, ToolName, map[string]any{"code": "x"})
	if text := textOf(t, res); !res.IsError || !strings.Contains(text, "limit of 1 concurrent sessions") {
		t.Errorf("second session's call = %q; want the sessions quota named", text)
	}
	if res := call(t, b, ToolName, map[string]any{"code": "x"}); res.IsError {
		t.Errorf("another tenant is refused: %s", textOf(t, res))
	}
	// mcp-go's client sends its DELETE without the custom headers, so the
	// test ends the session itself, as a client with its token would.
	deleteSession(t, srv.URL+"/mcp", "alpha-token", a1.GetSessionId())
	waitFor(t, "the session quota to free up", func() bool {
		res := call(t, a2, ToolName, map[string]any{"code": "x"})
		return !res.IsError
	})
}

func TestDrain(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close)
	started, release := make(chan struct{}, 1), make(chan struct{})
	f.setRespond(blockingRespond(started, release))
	c1, c2 := httpTestClient(t, srv.URL), httpTestClient(t, srv.URL)
	var wg sync.WaitGroup
	wg.Go(func() {
		if res := call(t, c1, ToolName, map[string]any{"code": "long"}); res.IsError || textOf(t, res) != "long" {
			t.Errorf("the running call did not finish normally: %+v", res)
		}
	})
	<-started
	drained := make(chan error, 1)
	go func() { drained <- g.Drain(context.Background()) }()
	waitFor(t, "draining to begin", func() bool {
		return g.calls.Draining()
	})
	res := call(t, c2, ToolName, map[string]any{"code": "new"})
	if text := textOf(t, res); !res.IsError || !strings.Contains(text, "shutting down") {
		t.Errorf("a new call while draining = %q; want a shutting-down tool error", text)
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned %v while a call was running", err)
	default:
	}
	close(release)
	wg.Wait()
	if err := <-drained; err != nil {
		t.Errorf("Drain = %v after the call finished", err)
	}

	// A deadline ends the wait.
	g2, f2 := newTestGateway(t, Config{})
	started2, release2 := make(chan struct{}, 1), make(chan struct{})
	defer close(release2)
	f2.setRespond(blockingRespond(started2, release2))
	go func() { _, _ = g2.MCPServer(), call(t, connect(t, g2), ToolName, map[string]any{"code": "stuck"}) }()
	<-started2
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g2.Drain(ctx); err == nil {
		t.Error("Drain with an ended context and a running call = nil; want the context error")
	}
}

func httpTestClient(t *testing.T, url string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// deleteSession ends an MCP session with an authenticated DELETE.
func deleteSession(t *testing.T, url, token, id string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(server.HeaderKeySessionID, id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE session: status %d", resp.StatusCode)
	}
}

// TestSessionQuotaCountsReplacedSessions: a sandbox session that sandboxd
// lost and the gateway replaced counts once, not twice, and not zero times.
func TestSessionQuotaCountsReplacedSessions(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{Quotas: Quotas{Sessions: 1}})
	p := mustParams(t)
	if out := g.tool.Execute(t.Context(), "alpha", "s1", false, p, nil); out.Err != nil {
		t.Fatal(out.Err)
	}
	f.forget() // sandboxd restarted
	f.setCreateErr(errors.New("sandboxd is still starting"))
	if out := g.tool.Execute(t.Context(), "alpha", "s1", false, p, nil); out.Err == nil {
		t.Fatal("the replacement was created although CreateSession failed")
	}
	f.setCreateErr(nil)
	// The failed replacement released nothing twice: s1 may get its
	// sandbox back, and a second session is still over the quota.
	if out := g.tool.Execute(t.Context(), "alpha", "s1", false, p, nil); out.Err != nil {
		t.Fatalf("s1 after sandboxd came back: %v", out.Err)
	}
	var qe *QuotaError
	if out := g.tool.Execute(t.Context(), "alpha", "s2", false, p, nil); !errors.As(out.Err, &qe) {
		t.Errorf("a second session while s1 holds the only one: %v; want the sessions quota", out.Err)
	}
}
