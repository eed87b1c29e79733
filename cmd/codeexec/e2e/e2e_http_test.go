package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startProcess runs the codeexec binary with args until the test ends.
func startProcess(t *testing.T, env []string, args ...string) *lockedBuffer {
	t.Helper()
	_, logs := startCommand(t, env, args...)
	return logs
}

// startCommand is startProcess that also returns the command, for tests
// that signal or kill it. At the end of the test it is sent SIGTERM and
// must stop within 15 seconds.
func startCommand(t *testing.T, env []string, args ...string) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start codeexec %v: %v", args, err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(interruptSignal)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("codeexec %v did not stop within 15s of SIGTERM", args)
		}
		if t.Failed() {
			t.Logf("codeexec %v output:\n%s", args, tailOf(logs.String(), 6000))
		}
	})
	return cmd, logs
}

// waitHTTP waits until url answers.
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come up: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func httpClient(t *testing.T, base string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(base + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	initialize(t, c)
	return c
}

func startHTTP(t *testing.T, extra map[string]string) string {
	t.Helper()
	addr := freeAddr(t)
	startProcess(t, baseEnv(t, extra), "serve", "--http", addr)
	base := "http://" + addr
	waitHTTP(t, base+"/healthz")
	return base
}

func TestE2EHTTPSessionsAreSeparateAndParallel(t *testing.T) {
	t.Parallel()
	base := startHTTP(t, nil)
	a, b := httpClient(t, base), httpClient(t, base)
	code(t, a, "who = 'a'")
	code(t, b, "who = 'b'")
	if got := joined(code(t, a, "print(who)").stdout()); got != "a" {
		t.Fatalf("session a sees who=%q", got)
	}
	if got := joined(code(t, b, "print(who)").stdout()); got != "b" {
		t.Fatalf("session b sees who=%q", got)
	}
	// Different sessions run at the same time: their sleeps overlap.
	var (
		wg    sync.WaitGroup
		spans [2][2]float64
	)
	for i, c := range []*client.Client{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := code(t, c, "import time\nt0 = time.time(); time.sleep(1); print(t0, time.time())")
			f := strings.Fields(joined(o.stdout()))
			if len(f) == 2 {
				spans[i][0], _ = strconv.ParseFloat(f[0], 64)
				spans[i][1], _ = strconv.ParseFloat(f[1], 64)
			}
		}()
	}
	wg.Wait()
	if !(spans[0][0] < spans[1][1] && spans[1][0] < spans[0][1]) {
		t.Fatalf("two sessions did not run in parallel: %v", spans)
	}
}

func TestE2EHTTPMetricsMove(t *testing.T) {
	t.Parallel()
	base := startHTTP(t, nil)
	c := httpClient(t, base)
	before := metric(t, base, `codeexec_sandbox_exec_seconds_count{status="ok"}`)
	code(t, c, "pass")
	code(t, c, "pass")
	runPython(t, c, map[string]any{"code": "1/0"})
	if got := metric(t, base, `codeexec_sandbox_exec_seconds_count{status="ok"}`); got != before+2 {
		t.Fatalf("ok execs went from %v to %v, want +2", before, got)
	}
	if got := metric(t, base, `codeexec_sandbox_exec_seconds_count{status="error"}`); got != 1 {
		t.Fatalf("error execs = %v, want 1", got)
	}
	if got := metric(t, base, `codeexec_sandbox_sessions`); got != 1 {
		t.Fatalf("live sessions = %v, want 1", got)
	}
}

// metric reads one sample from /metrics; absent counts as 0.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

func TestE2ESurface(t *testing.T) {
	t.Parallel()
	c, _ := startStdio(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "run_python" {
		t.Fatalf("tools/list = %+v, %v; want exactly run_python", tools, err)
	}
	def, _ := json.Marshal(tools.Tools[0])
	if len(def) >= 1200 {
		t.Fatalf("the run_python definition is %d characters, want < 1200:\n%s", len(def), def)
	}
	res, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil || len(res.Resources) != 1 || res.Resources[0].URI != "resource://mcp-server-code-execution-mode/capabilities" {
		t.Fatalf("resources/list = %+v, %v", res, err)
	}
	read := mcp.ReadResourceRequest{}
	read.Params.URI = res.Resources[0].URI
	body, err := c.ReadResource(ctx, read)
	if err != nil || len(body.Contents) != 1 {
		t.Fatalf("resources/read = %+v, %v", body, err)
	}
	if text := body.Contents[0].(mcp.TextResourceContents).Text; !strings.Contains(text, "# Code Execution MCP Capabilities") {
		t.Fatalf("capabilities text lacks its heading:\n%s", text)
	}
	// The manual inside the sandbox.
	o := code(t, c, "print(runtime.capability_summary())\nimport mcp.runtime as rt\nprint(rt is runtime)")
	if out := joined(o.stdout()); !strings.Contains(out, "save_memory") || !strings.HasSuffix(out, "True") {
		t.Fatalf("capability_summary() output:\n%s", out)
	}
	// Validation and clamping are upstream's.
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"code": "  "}, "Missing 'code' argument"},
		{map[string]any{"code": "pass", "servers": "github"}, "'servers' must be a list"},
		{map[string]any{"code": "pass", "timeout": "soon"}, "'timeout' must be an integer"},
	} {
		o := runPython(t, c, tc.args)
		if !o.IsError || o.str("status") != "validation_error" || !strings.Contains(o.Text, tc.want) {
			t.Errorf("run_python(%v) = %s (%v), want validation_error %q", tc.args, o.Text, o.Structured, tc.want)
		}
	}
	o = runPython(t, c, map[string]any{"code": "pass", "servers": []any{"nope"}})
	if !o.IsError || !strings.Contains(o.Text, `unknown MCP server "nope"`) {
		t.Fatalf("unknown server: %s", o.Text)
	}
}

func TestE2EToonOutput(t *testing.T) {
	t.Parallel()
	c, _ := startStdio(t, map[string]string{"MCP_BRIDGE_OUTPUT_MODE": "toon"})
	o := code(t, c, "print('line1'); print('line2')")
	if !strings.HasPrefix(o.Text, "```toon\n") || !strings.Contains(o.Text, "status: success") {
		t.Fatalf("TOON text:\n%s", o.Text)
	}
	want := map[string]any{"status": "success", "summary": "Success", "exitCode": float64(0), "stdout": []any{"line1", "line2"}}
	got, _ := json.Marshal(o.Structured)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Fatalf("structuredContent = %s, want %s", got, exp)
	}
}

func TestE2EProgressArrivesBeforeResult(t *testing.T) {
	t.Parallel()
	base := startAuthHTTP(t, map[string]string{"CODEEXEC_TOKENS_FILE": tokensFile(t, map[string]string{"alpha-token": "alpha"})})
	c := tokenClient(t, base, "alpha-token")
	var mu sync.Mutex
	var messages []string
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" && n.Params.AdditionalFields["progressToken"] == "p-1" {
			mu.Lock()
			messages = append(messages, fmt.Sprint(n.Params.AdditionalFields["message"]))
			mu.Unlock()
		}
	})
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = map[string]any{"code": "import time\nfor i in range(3):\n    print('tick', i, flush=True)\n    time.sleep(0.6)"}
	req.Params.Meta = &mcp.Meta{ProgressToken: "p-1"}
	res, err := c.CallTool(context.Background(), req)
	mu.Lock()
	before := append([]string(nil), messages...)
	mu.Unlock()
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if len(before) == 0 || before[0] != "tick 0" {
		t.Fatalf("progress notifications received before the result: %q; want the first to be %q", before, "tick 0")
	}
	// The final result is unchanged by streaming.
	text := res.Content[0].(mcp.TextContent).Text
	if !strings.Contains(text, "tick 0\ntick 1\ntick 2") {
		t.Errorf("result text %q lacks the whole output", text)
	}
}

func TestE2EShutdownLetsRunningExecFinish(t *testing.T) {
	t.Parallel()
	mark := "e2e-shutdown-" + strings.ReplaceAll(t.TempDir(), "/", "_")
	sleepMark := fmt.Sprintf("%d.%03d", time.Now().UnixNano()%100000, 11)
	addr := freeAddr(t)
	base := "http://" + addr
	logs := &lockedBuffer{}
	cmd := exec.Command(binary, "serve", "--http", addr, "--shutdown-grace", "60s")
	cmd.Env = baseEnv(t, map[string]string{
		"CODEEXEC_TOKENS_FILE": tokensFile(t, map[string]string{"alpha-token": "alpha"}),
		"MCP_SERVERS_CONFIG":   memoryUpstream(t, mark),
	})
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("codeexec output:\n%s", tailOf(logs.String(), 8000))
		}
	})
	waitHTTP(t, base+"/healthz")
	c, late := tokenClient(t, base, "alpha-token"), tokenClient(t, base, "alpha-token")
	// The upstream server runs, and so does a detached sandbox child.
	o := runPython(t, c, map[string]any{"code": "print(await mcp_memory.read_graph())", "servers": []any{"memory"}})
	if o.IsError || len(markedProcesses(mark)) == 0 {
		t.Fatalf("the memory server is not running (%s), so the orphan check proves nothing", o.Text)
	}
	code(t, late, "pass")

	result := make(chan outcome, 1)
	go func() {
		result <- runPython(t, c, map[string]any{"code": fmt.Sprintf(`
import subprocess, time
subprocess.Popen(["sleep", "%s"], start_new_session=True)
time.sleep(3)
print("finished")`, sleepMark)})
	}()
	for len(processesWithArg(sleepMark)) == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(interruptSignal); err != nil {
		t.Fatal(err)
	}
	// New calls are refused while the running one finishes. A call may
	// still get in before the signal is handled; the next ones may not.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		o := runPython(t, late, map[string]any{"code": "print('late')"})
		if o.IsError {
			if !strings.Contains(o.Text, "shutting down") {
				t.Errorf("a call after SIGTERM = %q; want a shutting-down tool error", o.Text)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("calls are still accepted long after SIGTERM")
		}
	}
	if o := <-result; o.IsError || joined(o.stdout()) != "finished" {
		t.Fatalf("the exec running at SIGTERM ended with %q; want it to finish", o.Text)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("codeexec exited with %v after SIGTERM; want 0", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("codeexec did not exit after SIGTERM and the last call ended")
	}
	if pids := processesWithArg(sleepMark); len(pids) != 0 {
		t.Errorf("sandbox processes %v outlived the server", pids)
	}
	if procs := markedProcesses(mark); len(procs) != 0 {
		t.Errorf("upstream servers %v outlived the server", procs)
	}
}
