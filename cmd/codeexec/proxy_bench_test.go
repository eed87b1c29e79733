package main

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
//	go test -run '^$' -bench BenchmarkProxyOverhead -benchtime 3x ./cmd/codeexec/
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
		lines := o.stdout()
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
// startStdio, isolated from the developer's configs and state.
func serveTB(tb testing.TB, extra map[string]string) *client.Client {
	tb.Helper()
	home := tb.TempDir()
	env := map[string]string{"HOME": home, "MCP_BRIDGE_STATE_DIR": filepath.Join(home, "MCPs"), "CODEEXEC_POOL_SIZE": "1"}
	for k, v := range extra {
		env[k] = v
	}
	var envList []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); env[k] == "" {
			envList = append(envList, kv)
		}
	}
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	logs := &lockedBuffer{}
	c, err := client.NewStdioMCPClientWithOptions(binary, envList, []string{"serve"}, transport.WithCommandStderrWriter(logs))
	if err != nil {
		tb.Fatalf("start codeexec serve: %v", err)
	}
	tb.Cleanup(func() {
		_ = c.Close()
		if tb.Failed() {
			tb.Logf("codeexec serve stderr:\n%s", tailOf(logs.String(), 6000))
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
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "codeexec-bench", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		tb.Fatalf("initialize: %v", err)
	}
}

// runPythonTB is runPython for a testing.TB.
func runPythonTB(tb testing.TB, c *client.Client, args map[string]any) outcome {
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
	o := outcome{IsError: res.IsError, Structured: map[string]any{}}
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
