// Package harness is what the end-to-end tests of codeexec share (the
// packages cmd/codeexec/e2e and cmd/codeexec/e2e/durable): the binary,
// built once by Main, the environment it runs in, and the MCP clients and
// processes the tests drive it with.
package harness

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/codeexec/codeexec/services/testenv"
)

// Main sets these.
var (
	// Binary is the codeexec binary built once for the end-to-end tests.
	Binary string
	// Root is the module's root directory.
	Root string
)

// Main is a test package's TestMain: it builds the binary, runs the tests
// (with the tests' PostgreSQL, services/pgtest) and exits.
func Main(m *testing.M) {
	testenv.ShortMain("the codeexec binary, real sandboxes, Node.js and PostgreSQL")
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	Root = root
	dir, err := os.MkdirTemp("", "codeexec-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// CODEEXEC_E2E_BINARY: a binary built already (a test machine's run
	// of the suite takes the host's).
	if Binary = os.Getenv("CODEEXEC_E2E_BINARY"); Binary == "" {
		Binary = filepath.Join(dir, "codeexec")
		build := exec.Command("go", "build", "-o", Binary, "./cmd/codeexec")
		build.Dir = Root
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building codeexec for the end-to-end tests failed:", err)
			os.Exit(1)
		}
	}
	code := pgtest.Main(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// moduleRoot is the directory of go.mod, above the working directory (a
// test's is its package's).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// ContainerRuntime is the container runtime the suite's sandboxes run
// under (CODEEXEC_E2E_RUNTIME: "podman" or "docker"), or "" for bwrap.
func ContainerRuntime() string { return os.Getenv("CODEEXEC_E2E_RUNTIME") }

// BaseEnv isolates a server from the developer's own configs and state.
func BaseEnv(t testing.TB, extra map[string]string) []string {
	t.Helper()
	home := t.TempDir()
	env := map[string]string{
		"HOME":                 home,
		"MCP_BRIDGE_STATE_DIR": filepath.Join(home, "MCPs"),
		"CODEEXEC_POOL_SIZE":   "1",
		"MCP_BRIDGE_LOG_LEVEL": "debug",
	}
	// CODEEXEC_E2E_ENV=NAME runs the sandboxes in that environment (see
	// codeexec env); unset, on the host's /usr, whatever is built here,
	// so that a build beside the suite changes no test's outcome.
	env["CODEEXEC_ENV"] = cmp.Or(os.Getenv("CODEEXEC_E2E_ENV"), "host")
	// CODEEXEC_E2E_RUNTIME=podman|docker runs the whole suite in containers
	// (image CODEEXEC_E2E_IMAGE, default localhost/codeexec-sandbox:latest from
	// deploy/build-images.sh); unset, the default runtime (bwrap) is used.
	if rt := ContainerRuntime(); rt != "" {
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

// LockedBuffer collects a child's stderr for failure messages.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Await reports whether s is in the buffer within d. A process's log line
// reaches the buffer through a pipe, so it may come after an answer the
// process sent later.
func (l *LockedBuffer) Await(s string, d time.Duration) bool {
	for deadline := time.Now().Add(d); !strings.Contains(l.String(), s); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// StartStdio launches `codeexec serve` on stdio and returns an initialised
// MCP client. The server is stopped when the test ends.
func StartStdio(t *testing.T, extra map[string]string) (*client.Client, *LockedBuffer) {
	t.Helper()
	return StartStdioIn(t, "", extra)
}

// StartStdioIn is StartStdio with codeexec started in the working
// directory dir, as a client starts it in the project it has open; ""
// is the test's own.
func StartStdioIn(t *testing.T, dir string, extra map[string]string) (*client.Client, *LockedBuffer) {
	t.Helper()
	return StartBinaryIn(t, Binary, dir, extra)
}

// StartBinaryIn is StartStdioIn with the codeexec binary at bin, as a
// user who renamed or moved it starts it.
func StartBinaryIn(t *testing.T, bin, dir string, extra map[string]string) (*client.Client, *LockedBuffer) {
	t.Helper()
	logs := &LockedBuffer{}
	c, err := client.NewStdioMCPClientWithOptions(bin, BaseEnv(t, extra), []string{"serve"},
		transport.WithCommandStderrWriter(logs),
		transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
			cmd := exec.CommandContext(ctx, command, args...)
			cmd.Env, cmd.Dir = env, dir
			return cmd, nil
		}))
	if err != nil {
		t.Fatalf("start codeexec serve: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		if t.Failed() {
			t.Logf("codeexec serve stderr:\n%s", TailOf(logs.String(), 6000))
		}
	})
	Initialize(t, c)
	return c, logs
}

// Initialize initialises c's MCP session, failing the test on an error.
func Initialize(t *testing.T, c *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := InitializeErr(ctx, c); err != nil {
		t.Fatal(err)
	}
}

// InitializeErr is initialize for goroutines other than the test's.
func InitializeErr(ctx context.Context, c *client.Client) error {
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

// TailOf is the last n bytes of s, for failure messages.
func TailOf(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// Outcome is one run_python result, decoded.
type Outcome struct {
	Text       string
	IsError    bool
	Structured map[string]any
}

// Stdout returns the stdout lines from the structured result, or from the
// text of a result without one (a large one, or one with images).
func (o Outcome) Stdout() []string {
	if len(o.Structured) == 0 {
		out, _ := textStreams(o.Text)
		return out
	}
	return StrList(o.Structured["stdout"])
}

// Stderr returns the stderr lines, as Stdout does.
func (o Outcome) Stderr() []string {
	if len(o.Structured) == 0 {
		_, errs := textStreams(o.Text)
		return errs
	}
	return StrList(o.Structured["stderr"])
}

// textStreams splits a compact text result into its stdout and stderr
// lines: the status and exit lines first, then stdout, then "stderr:"
// and stderr.
func textStreams(text string) (stdout, stderr []string) {
	for _, p := range []string{"status: ", "exit: "} {
		if strings.HasPrefix(text, p) {
			_, text, _ = strings.Cut(text, "\n")
		}
	}
	out, errs, found := strings.Cut(text, "stderr:\n")
	if found && out != "" && !strings.HasSuffix(out, "\n") {
		out, errs, found = text, "", false
		if i := strings.Index(text, "\nstderr:\n"); i >= 0 {
			out, errs, found = text[:i+1], text[i+len("\nstderr:\n"):], true
		}
	}
	if out = strings.TrimSuffix(out, "\n"); out != "" {
		stdout = strings.Split(out, "\n")
	}
	if found {
		stderr = strings.Split(errs, "\n")
	}
	return stdout, stderr
}

// Str returns the structured result's string k.
func (o Outcome) Str(k string) string {
	s, _ := o.Structured[k].(string)
	return s
}

// StrList is v's strings, v a JSON list.
func StrList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// RunPython calls run_python with the given arguments.
func RunPython(t *testing.T, c *client.Client, args map[string]any) Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o, err := CallRunPython(ctx, c, args)
	if err != nil {
		t.Fatalf("run_python(%v): %v", args, err)
	}
	return o
}

// CallRunPython is runPython for goroutines other than the test's.
func CallRunPython(ctx context.Context, c *client.Client, args map[string]any) (Outcome, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = args
	o := Outcome{Structured: map[string]any{}}
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

// Code runs one snippet and fails the test unless it succeeded.
func Code(t *testing.T, c *client.Client, src string) Outcome {
	t.Helper()
	o := RunPython(t, c, map[string]any{"code": src})
	if o.IsError {
		t.Fatalf("run_python(%q) failed: %s", src, o.Text)
	}
	return o
}

// Joined joins lines with newlines.
func Joined(lines []string) string { return strings.Join(lines, "\n") }

// MCPClient is the client type the helpers take.
type MCPClient = *client.Client

// SDKResult is what testdata/sdkclient.mjs prints.
type SDKResult struct {
	ProtocolVersion string           `json:"protocolVersion"`
	Results         []map[string]any `json:"results"`
	Reads           []SDKRead        `json:"reads"`
	// Elicitations are the questions the client was asked (spec.elicit).
	Elicitations []map[string]any `json:"elicitations"`
	Error        string           `json:"error"`
}

// SDKRead is one resources/read of testdata/sdkclient.mjs: the result,
// or the error the SDK threw.
type SDKRead struct {
	URI    string `json:"uri"`
	Result *struct {
		Contents []map[string]any `json:"contents"`
	} `json:"result"`
	Error *struct {
		Code             int            `json:"code"`
		Message          string         `json:"message"`
		Data             map[string]any `json:"data"`
		ResourceNotFound bool           `json:"resourceNotFound"`
	} `json:"error"`
}

// SDKClient runs testdata/sdkclient.mjs with spec.
func SDKClient(t *testing.T, spec map[string]any) SDKResult {
	t.Helper()
	var res SDKResult
	if stderr := NodeJSON(t, "sdkclient.mjs", spec, 2*time.Minute, &res); res.Error != "" {
		t.Fatalf("sdkclient.mjs: %s\nstderr:\n%s", res.Error, TailOf(stderr, 4000))
	}
	return res
}

// NodeJSON runs testdata/script, a client written on the SDK v2 in Node,
// with spec as its argument, within limit, and decodes what it prints into
// out; it returns the script's stderr. A script that fails or prints no
// JSON fails the test with its output.
func NodeJSON(t *testing.T, script string, spec any, limit time.Duration, out any) string {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed (the SDK v2 client runs on it): apt-get install nodejs")
	}
	if _, err := os.Stat(filepath.Join(Root, "node_modules/@modelcontextprotocol/client/package.json")); err != nil {
		t.Fatal("@modelcontextprotocol/client is not installed: run npm ci at the repository root")
	}
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(Root, "cmd/codeexec/e2e/testdata", script), string(raw))
	var stderr LockedBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if jerr := json.Unmarshal(stdout, out); jerr != nil || err != nil {
		t.Fatalf("%s: %v %v\nstdout: %s\nstderr:\n%s", script, err, jerr, TailOf(string(stdout), 4000), TailOf(stderr.String(), 4000))
	}
	return stderr.String()
}

// ResultStdout joins the stdout lines of the i-th result's
// structuredContent, failing the test on an error result.
func ResultStdout(t *testing.T, r SDKResult, i int) string {
	t.Helper()
	if i >= len(r.Results) {
		t.Fatalf("no result %d in %+v", i, r)
	}
	res := r.Results[i]
	if isErr, _ := res["isError"].(bool); isErr {
		t.Fatalf("result %d is an error: %v", i, res)
	}
	sc, _ := res["structuredContent"].(map[string]any)
	return Joined(StrList(sc["stdout"]))
}

// InterruptSignal is what a service manager sends to stop codeexec.
var InterruptSignal = syscall.SIGTERM
