package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// proxyCalls is how many echo calls one round times on each path.
const proxyCalls = 300

// BenchmarkProxyOverhead measures what codeexec adds to one tool call:
// sandbox code → sandboxd → discoveryd → upstream and back, against a Go
// MCP client calling the same server directly. Both paths call
// server-everything's echo over stdio in the same run. The sandbox path is
// timed inside the sandbox around each await, so MCP and run_python
// overhead are not counted. Each b.N iteration is one round of proxyCalls
// calls per path; the percentiles cover every call of every round.
//
//	go test -run '^$' -bench BenchmarkProxyOverhead -benchtime 3x ./cmd/codeexec/e2e/
func BenchmarkProxyOverhead(b *testing.B) {
	node := lookTool(b, "node", "install Node.js 18+ and run `npm ci`")
	everything := npmEntry(b, "server-everything")

	direct, err := client.NewStdioMCPClient(node, nil, everything, "stdio")
	if err != nil {
		b.Fatalf("start server-everything: %v", err)
	}
	b.Cleanup(func() { _ = direct.Close() })
	initializeTB(b, direct)

	cfg := filepath.Join(b.TempDir(), "servers.json")
	writeServers(b, cfg, map[string]any{"everything": map[string]any{"command": node, "args": []any{everything, "stdio"}}})
	served := serveTB(b, map[string]string{"MCP_SERVERS_CONFIG": cfg, "MCP_BRIDGE_LOG_LEVEL": "info"})
	loop := fmt.Sprintf(`import json, time
for _ in range(20):
    await mcp_everything.echo(message="x")
ds = []
for _ in range(%d):
    t0 = time.perf_counter()
    await mcp_everything.echo(message="x")
    ds.append(time.perf_counter() - t0)
print(json.dumps(ds))`, proxyCalls)

	ctx := context.Background()
	call := mcp.CallToolRequest{}
	call.Params.Name = "echo"
	call.Params.Arguments = map[string]any{"message": "x"}
	for range 20 { // warm up, as the sandbox loop does
		if _, err := direct.CallTool(ctx, call); err != nil {
			b.Fatal(err)
		}
	}

	var directs, proxied []time.Duration
	b.ResetTimer()
	for b.Loop() {
		for range proxyCalls {
			t0 := time.Now()
			res, err := direct.CallTool(ctx, call)
			d := time.Since(t0)
			if err != nil || res.IsError {
				b.Fatalf("direct echo: %v %v", res, err)
			}
			directs = append(directs, d)
		}
		o := runPythonTB(b, served, map[string]any{"code": loop, "servers": []any{"everything"}})
		lines := o.Stdout()
		var secs []float64
		if o.IsError || len(lines) == 0 || json.Unmarshal([]byte(lines[len(lines)-1]), &secs) != nil || len(secs) != proxyCalls {
			b.Fatalf("sandbox loop failed: %s", o.Text)
		}
		for _, s := range secs {
			proxied = append(proxied, time.Duration(s*float64(time.Second)))
		}
	}
	b.StopTimer()
	dp50, dp99 := percentile(directs, 0.50), percentile(directs, 0.99)
	pp50, pp99 := percentile(proxied, 0.50), percentile(proxied, 0.99)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(dp50), "direct-p50-µs")
	b.ReportMetric(us(dp99), "direct-p99-µs")
	b.ReportMetric(us(pp50), "proxy-p50-µs")
	b.ReportMetric(us(pp99), "proxy-p99-µs")
	b.ReportMetric(us(pp50-dp50), "overhead-p50-µs")
	b.ReportMetric(us(pp99-dp99), "overhead-p99-µs")
}

// percentile returns the q-quantile of ds (nearest rank).
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}

// writeServers writes an MCP_SERVERS_CONFIG file.
func writeServers(tb testing.TB, path string, servers map[string]any) {
	tb.Helper()
	raw, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// serveTB starts `codeexec serve` on stdio for a benchmark or test, like
// harness.StartStdio, with harness.BaseEnv's environment.
func serveTB(tb testing.TB, extra map[string]string) *client.Client {
	tb.Helper()
	envList := harness.BaseEnv(tb, extra)
	logs := &harness.LockedBuffer{}
	c, err := client.NewStdioMCPClientWithOptions(harness.Binary, envList, []string{"serve"}, transport.WithCommandStderrWriter(logs))
	if err != nil {
		tb.Fatalf("start codeexec serve: %v", err)
	}
	tb.Cleanup(func() {
		_ = c.Close()
		if tb.Failed() {
			tb.Logf("codeexec serve stderr:\n%s", harness.TailOf(logs.String(), 6000))
		}
	})
	initializeTB(tb, c)
	return c
}

func initializeTB(tb testing.TB, c *client.Client) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION // a session-based client
	req.Params.ClientInfo = mcp.Implementation{Name: "codeexec-bench", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		tb.Fatalf("initialize: %v", err)
	}
}

// runPythonTB is runPython for a testing.TB.
func runPythonTB(tb testing.TB, c *client.Client, args map[string]any) harness.Outcome {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		tb.Fatalf("run_python: %v", err)
	}
	o := harness.Outcome{IsError: res.IsError, Structured: map[string]any{}}
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			o.Text += tc.Text
		}
	}
	if res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &o.Structured)
	}
	return o
}

// TestE2EDiscoveryTokens logs the context the model spends on tools, in
// characters and in tokens estimated as characters / 4 (an approximation;
// real tokenizers differ by model):
//
//   - the fixed surface: the run_python definition from tools/list;
//   - a typical discovery round: search_tool_docs in summary detail, then
//     query_tool_docs in full for one tool, printed by sandbox code, as the
//     code the model writes and the result text it reads;
//   - listing every tool schema of the three real servers directly, i.e.
//     their tools/list JSON, which a client without code mode puts in
//     context.
//
// Run it with:
//
//	go test -run TestE2EDiscoveryTokens -v ./cmd/codeexec/
func TestE2EDiscoveryTokens(t *testing.T) {
	t.Parallel()
	u := configureUpstreams(t)
	c, _ := harness.StartStdio(t, u.env())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil || len(list.Tools) != 1 {
		t.Fatalf("tools/list = %v, %v; want run_python only", list, err)
	}
	def, _ := json.Marshal(list.Tools[0])

	src := `import json
print(json.dumps(await runtime.search_tool_docs("read a file")))
print(json.dumps(await runtime.query_tool_docs("filesystem", "read_text_file", detail="full")))`
	o := harness.RunPython(t, c, map[string]any{"code": src, "servers": []any{"filesystem"}})
	if o.IsError || len(o.Stdout()) != 2 || !strings.Contains(o.Text, `"inputSchema"`) {
		t.Fatalf("discovery round failed: %s", o.Text)
	}
	printed := harness.Joined(o.Stdout())

	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	direct := 0
	var per []string
	for _, s := range []struct{ pkg, arg string }{{"server-everything", "stdio"}, {"server-filesystem", u.dir}, {"server-memory", ""}} {
		args := []string{npmEntry(t, s.pkg)}
		env := []string{"MEMORY_FILE_PATH=" + filepath.Join(t.TempDir(), "memory.jsonl")}
		if s.arg != "" {
			args = append(args, s.arg)
		}
		dc, err := client.NewStdioMCPClient(node, env, args...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = dc.Close() })
		initializeTB(t, dc)
		tools, err := dc.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatalf("%s tools/list: %v", s.pkg, err)
		}
		raw, _ := json.Marshal(tools.Tools)
		direct += len(raw)
		per = append(per, fmt.Sprintf("%s %d tools %d chars", s.pkg, len(tools.Tools), len(raw)))
	}

	round := len(src) + len(o.Text)
	tok := func(n int) int { return (n + 3) / 4 }
	t.Logf("fixed surface: run_python definition %d chars ≈ %d tokens", len(def), tok(len(def)))
	t.Logf("discovery round: code %d chars + result text %d chars (printed JSON %d) = %d chars ≈ %d tokens", len(src), len(o.Text), len(printed), round, tok(round))
	t.Logf("every tool schema listed directly: %d chars ≈ %d tokens (%s)", direct, tok(direct), strings.Join(per, "; "))
	t.Logf("fixed surface + one discovery round = %d%% of listing every schema", 100*(len(def)+round)/direct)
	// Code mode is the cheaper way to reach a tool, even counting one
	// whole discovery round on top of the fixed surface.
	if len(def)+round >= direct {
		t.Errorf("fixed surface (%d) + discovery round (%d) is not smaller than listing every schema (%d)", len(def), round, direct)
	}
}
