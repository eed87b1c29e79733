package e2e

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// metricSum adds up every sample of a metric family whose labels include
// all of want (name_count for histograms).
func metricSum(t *testing.T, url, name string, want ...string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	total := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(line, w)
		}
		if i := strings.LastIndexByte(line, ' '); ok && i > 0 {
			v, _ := strconv.ParseFloat(line[i+1:], 64)
			total += v
		}
	}
	return total
}

// TestE2EMetricsAndRequestIDsAcrossSplitServices runs every service as its
// own process: one MCP call's request ID appears in each service's log,
// and each service's metrics move.
func TestE2EMetricsAndRequestIDsAcrossSplitServices(t *testing.T) {
	t.Parallel()
	mark := "e2e-split-" + strings.ReplaceAll(t.TempDir(), "/", "_")
	env := harness.BaseEnv(t, map[string]string{"MCP_SERVERS_CONFIG": memoryUpstream(t, mark)})
	dir := t.TempDir()
	memSock := "unix:" + dir + "/memoryd.sock"
	discAddr, discMetrics, memMetrics := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	sbAddr, sbMetrics, gwAddr := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	memLogs := harness.StartProcess(t, env, "memoryd", "--listen", memSock, "--db", dir+"/codeexec.db", "--metrics", memMetrics)
	discLogs := harness.StartProcess(t, env, "discoveryd", "--listen", discAddr, "--metrics", discMetrics)
	harness.WaitHealth(t, memSock)
	harness.WaitHealth(t, discAddr)
	sbLogs := harness.StartProcess(t, env, "sandboxd", "--listen", sbAddr, "--memory-addr", memSock, "--discovery", discAddr, "--metrics", sbMetrics, "--pool", "1")
	harness.WaitHealth(t, sbAddr)
	gwLogs := harness.StartProcess(t, env, "gateway", "--sandbox", sbAddr, "--http", gwAddr,
		"--tokens-file", harness.TokensFile(t, map[string]string{"alpha-token": "alpha"}))
	gw := "http://" + gwAddr
	harness.WaitHTTP(t, gw+"/healthz")

	if resp, _ := rawInitialize(t, gw, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: status %d", resp.StatusCode)
	}
	c := tokenClient(t, gw, "alpha-token")
	o := harness.RunPython(t, c, map[string]any{"servers": []any{"memory"}, "code": `
save_memory("k", 1)
print(await mcp_memory.read_graph())
print(await runtime.search_tool_docs("read graph"))`})
	if o.IsError {
		t.Fatalf("call failed: %s", o.Text)
	}

	// The gateway named the call; every service logged that name.
	// Log lines reach the test through pipes, so they are waited for.
	m := waitLog(t, "gateway", gwLogs, regexp.MustCompile(`msg="run_python finished".* request\.id=([0-9a-f]+)`))
	id := regexp.QuoteMeta("request.id=" + m[1])
	for name, logs := range map[string]*harness.LockedBuffer{"sandboxd": sbLogs, "memoryd": memLogs, "discoveryd": discLogs} {
		waitLog(t, name, logs, regexp.MustCompile(id))
	}
	waitLog(t, "sandboxd", sbLogs, regexp.MustCompile(`msg="exec finished".* `+id))
	// The call's first step, creating its sandbox session, carries it too.
	waitLog(t, "sandboxd", sbLogs, regexp.MustCompile(`msg="session created".* `+id))

	for _, tc := range []struct {
		url, name string
		labels    []string
	}{
		{gw, "codeexec_gateway_tool_call_seconds_count", []string{`status="success"`}},
		{gw, "codeexec_gateway_http_denied_total", []string{`reason="missing_token"`}},
		{"http://" + sbMetrics, "codeexec_sandbox_exec_seconds_count", []string{`status="ok"`}},
		{"http://" + memMetrics, "codeexec_memoryd_op_duration_seconds_count", nil},
		{"http://" + discMetrics, "codeexec_discovery_tool_call_seconds_count", []string{`outcome="ok"`, `server="memory"`}},
		{"http://" + discMetrics, "codeexec_discovery_search_seconds_count", nil},
	} {
		if got := metricSum(t, tc.url, tc.name, tc.labels...); got < 1 {
			t.Errorf("%s%v = %v after the call; want at least 1", tc.name, tc.labels, got)
		}
	}
	// Every metric the Grafana dashboard queries is exported by a service.
	var exported strings.Builder
	for _, u := range []string{gw, "http://" + sbMetrics, "http://" + memMetrics, "http://" + discMetrics} {
		resp, err := http.Get(u + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		exported.Write(b)
	}
	for _, name := range dashboardMetrics(t) {
		if !strings.Contains(exported.String(), "\n"+name) {
			t.Errorf("deploy/grafana/codeexec.json queries %s, which no service exports", name)
		}
	}
	// Tokens spared are counted after the search answer is sent.
	for deadline := time.Now().Add(10 * time.Second); metricSum(t, "http://"+discMetrics, "codeexec_discovery_schema_tokens_spared_total") <= 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("codeexec_discovery_schema_tokens_spared_total stayed 0 after a search")
		}
	}
}

// waitLog waits for a service's log to match re and returns the match.
func waitLog(t *testing.T, name string, logs *harness.LockedBuffer, re *regexp.Regexp) []string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's log has no line matching %s:\n%s", name, re, harness.TailOf(logs.String(), 3000))
		}
	}
}

// collector is a fake OTLP/gRPC trace collector that keeps span names by
// service.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans map[string][]string // trace ID (hex) → "service/span" names
}

func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				id := hex.EncodeToString(s.GetTraceId())
				c.spans[id] = append(c.spans[id], service+"/"+s.GetName())
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// traceOf returns the names in the trace that has a span named name.
func (c *collector) traceOf(name string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, names := range c.spans {
		if slices.Contains(names, name) {
			return slices.Clone(names)
		}
	}
	return nil
}

// TestE2EMetricsTracesOverOTLP: with --otlp-endpoint, one run_python call
// is one trace from the gateway's span through sandboxd to memoryd, as
// separate processes export it.
func TestE2EMetricsTracesOverOTLP(t *testing.T) {
	t.Parallel()
	col := &collector{spans: map[string][]string{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(g, col)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)

	env := harness.BaseEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + lis.Addr().String()})
	dir := t.TempDir()
	memSock := "unix:" + dir + "/memoryd.sock"
	sbAddr, gwAddr := harness.FreeAddr(t), harness.FreeAddr(t)
	harness.StartProcess(t, env, "memoryd", "--listen", memSock, "--db", dir+"/codeexec.db", "--metrics", "")
	harness.WaitHealth(t, memSock)
	harness.StartProcess(t, env, "sandboxd", "--listen", sbAddr, "--memory-addr", memSock, "--metrics", "", "--pool", "1")
	harness.WaitHealth(t, sbAddr)
	harness.StartProcess(t, env, "gateway", "--sandbox", sbAddr, "--http", gwAddr)
	harness.WaitHTTP(t, "http://"+gwAddr+"/healthz")
	c := harness.HTTPClient(t, "http://"+gwAddr)
	harness.Code(t, c, `save_memory("traced", 1)`)

	want := []string{
		"gateway/run_python",
		"gateway/codeexec.sandbox.v1.SandboxService/Execute",
		"sandboxd/codeexec.sandbox.v1.SandboxService/Execute",
		"sandboxd/codeexec.memory.v1.MemoryService/SaveMemory",
		"memoryd/codeexec.memory.v1.MemoryService/SaveMemory",
	}
	// The exporters batch spans for a few seconds before sending.
	var got []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got = col.traceOf("gateway/run_python")
		missing := slices.DeleteFunc(slices.Clone(want), func(w string) bool { return slices.Contains(got, w) })
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call's trace lacks %v; it has %v", missing, got)
		}
	}
}

// dashboardMetrics lists the metric names the Grafana dashboard queries.
func dashboardMetrics(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "grafana", "codeexec.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`\b(?:codeexec|grpc_server)_[a-z_]+`).FindAllString(string(raw), -1) {
		if !slices.Contains(names, m) {
			names = append(names, m)
		}
	}
	if len(names) < 10 {
		t.Fatalf("found only %v in the dashboard", names)
	}
	return names
}
