package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/services/pgtest"
)

// binary is the codeexec binary built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "codeexec-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "codeexec")
	build := exec.Command("go", "build", "-o", binary, "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building codeexec for the end-to-end tests failed:", err)
		os.Exit(1)
	}
	code := pgtest.Main(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// baseEnv isolates a server from the developer's own configs and state.
func baseEnv(t *testing.T, extra map[string]string) []string {
	t.Helper()
	home := t.TempDir()
	env := map[string]string{
		"HOME":                 home,
		"MCP_BRIDGE_STATE_DIR": filepath.Join(home, "MCPs"),
		"CODEEXEC_POOL_SIZE":   "1",
		"MCP_BRIDGE_LOG_LEVEL": "debug",
	}
	// CODEEXEC_E2E_RUNTIME=podman|docker runs the whole suite in containers
	// (image CODEEXEC_E2E_IMAGE, default localhost/codeexec-sandbox:latest from
	// deploy/build-images.sh); unset, the default runtime (bwrap) is used.
	if rt := os.Getenv("CODEEXEC_E2E_RUNTIME"); rt != "" {
		env["MCP_BRIDGE_RUNTIME"] = rt
		env["MCP_BRIDGE_IMAGE"] = cmp.Or(os.Getenv("CODEEXEC_E2E_IMAGE"), "localhost/codeexec-sandbox:latest")
	}
	for k, v := range extra {
		env[k] = v
	}
	// Start from the whole host environment: the sandbox must show none of
	// it, and the binary needs PATH to find bwrap.
	var out []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); env[k] == "" {
			out = append(out, kv)
		}
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// lockedBuffer collects a child's stderr for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startStdio launches `codeexec serve` on stdio and returns an initialised
// MCP client. The server is stopped when the test ends.
func startStdio(t *testing.T, extra map[string]string) (*client.Client, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	c, err := client.NewStdioMCPClientWithOptions(binary, baseEnv(t, extra), []string{"serve"},
		transport.WithCommandStderrWriter(logs))
	if err != nil {
		t.Fatalf("start codeexec serve: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		if t.Failed() {
			t.Logf("codeexec serve stderr:\n%s", tailOf(logs.String(), 6000))
		}
	})
	initialize(t, c)
	return c, logs
}

func initialize(t *testing.T, c *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := initializeErr(ctx, c); err != nil {
		t.Fatal(err)
	}
}

// initializeErr is initialize for goroutines other than the test's.
func initializeErr(ctx context.Context, c *client.Client) error {
	req := mcp.InitializeRequest{}
	// The latest session-based revision: most of these tests pin what an
	// existing client gets, byte for byte, and rely on its MCP session.
	// The 2026-07-28 (handle) era has tests of its own.
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "codeexec-e2e", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	return nil
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// outcome is one run_python result, decoded.
type outcome struct {
	Text       string
	IsError    bool
	Structured map[string]any
}

// stdout returns the stdout lines from the structured result.
func (o outcome) stdout() []string { return strList(o.Structured["stdout"]) }
func (o outcome) stderr() []string { return strList(o.Structured["stderr"]) }
func (o outcome) str(k string) string {
	s, _ := o.Structured[k].(string)
	return s
}

func strList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// runPython calls run_python with the given arguments.
func runPython(t *testing.T, c *client.Client, args map[string]any) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o, err := callRunPython(ctx, c, args)
	if err != nil {
		t.Fatalf("run_python(%v): %v", args, err)
	}
	return o
}

// callRunPython is runPython for goroutines other than the test's.
func callRunPython(ctx context.Context, c *client.Client, args map[string]any) (outcome, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = args
	o := outcome{Structured: map[string]any{}}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return o, err
	}
	o.IsError = res.IsError
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			o.Text += tc.Text
		}
	}
	if res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &o.Structured)
	}
	if o.Structured == nil {
		o.Structured = map[string]any{}
	}
	return o, nil
}

// code runs one snippet and fails the test unless it succeeded.
func code(t *testing.T, c *client.Client, src string) outcome {
	t.Helper()
	o := runPython(t, c, map[string]any{"code": src})
	if o.IsError {
		t.Fatalf("run_python(%q) failed: %s", src, o.Text)
	}
	return o
}

func joined(lines []string) string { return strings.Join(lines, "\n") }

// mcpClient is the client type the helpers take.
type mcpClient = *client.Client

// sdkResult is what testdata/sdkclient.mjs prints.
type sdkResult struct {
	ProtocolVersion string           `json:"protocolVersion"`
	Results         []map[string]any `json:"results"`
	Error           string           `json:"error"`
}

// sdkClient runs testdata/sdkclient.mjs with spec.
func sdkClient(t *testing.T, spec map[string]any) sdkResult {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed (the SDK v2 client runs on it): apt-get install nodejs")
	}
	if _, err := os.Stat("../../../node_modules/@modelcontextprotocol/client/package.json"); err != nil {
		t.Fatal("@modelcontextprotocol/client is not installed: run npm ci at the repository root")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "testdata/sdkclient.mjs", string(raw))
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	var res sdkResult
	if jerr := json.Unmarshal(stdout, &res); jerr != nil || err != nil || res.Error != "" {
		t.Fatalf("sdkclient.mjs: %v %v %s\nstdout: %s\nstderr:\n%s", err, jerr, res.Error, stdout, tailOf(stderr.String(), 4000))
	}
	return res
}

// resultStdout joins the stdout lines of the i-th result's
// structuredContent, failing the test on an error result.
func resultStdout(t *testing.T, r sdkResult, i int) string {
	t.Helper()
	if i >= len(r.Results) {
		t.Fatalf("no result %d in %+v", i, r)
	}
	res := r.Results[i]
	if isErr, _ := res["isError"].(bool); isErr {
		t.Fatalf("result %d is an error: %v", i, res)
	}
	sc, _ := res["structuredContent"].(map[string]any)
	return joined(strList(sc["stdout"]))
}

// interruptSignal is what a service manager sends to stop codeexec.
var interruptSignal = syscall.SIGTERM
