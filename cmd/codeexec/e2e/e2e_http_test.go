package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

func TestE2EHTTPSessionsAreSeparateAndParallel(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, nil)
	a, b := harness.HTTPClient(t, base), harness.HTTPClient(t, base)
	harness.Code(t, a, "who = 'a'")
	harness.Code(t, b, "who = 'b'")
	if got := harness.Joined(harness.Code(t, a, "print(who)").Stdout()); got != "a" {
		t.Fatalf("session a sees who=%q", got)
	}
	if got := harness.Joined(harness.Code(t, b, "print(who)").Stdout()); got != "b" {
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
			o := harness.Code(t, c, "import time\nt0 = time.time(); time.sleep(1); print(t0, time.time())")
			f := strings.Fields(harness.Joined(o.Stdout()))
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
	base := harness.StartHTTP(t, nil)
	c := harness.HTTPClient(t, base)
	before := harness.Metric(t, base, `codeexec_sandbox_exec_seconds_count{status="ok"}`)
	harness.Code(t, c, "pass")
	harness.Code(t, c, "pass")
	harness.RunPython(t, c, map[string]any{"code": "1/0"})
	if got := harness.Metric(t, base, `codeexec_sandbox_exec_seconds_count{status="ok"}`); got != before+2 {
		t.Fatalf("ok execs went from %v to %v, want +2", before, got)
	}
	if got := harness.Metric(t, base, `codeexec_sandbox_exec_seconds_count{status="error"}`); got != 1 {
		t.Fatalf("error execs = %v, want 1", got)
	}
	if got := harness.Metric(t, base, `codeexec_sandbox_sessions`); got != 1 {
		t.Fatalf("live sessions = %v, want 1", got)
	}
}

func TestE2ESurface(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "run_python" {
		t.Fatalf("tools/list = %+v, %v; want exactly run_python", tools, err)
	}
	// The title and hints are the client's; the size bounds what a model
	// reads.
	tool := tools.Tools[0]
	if a := tool.Annotations; tool.Title != "Run Python" || a.ReadOnlyHint == nil || *a.ReadOnlyHint || a.OpenWorldHint == nil || !*a.OpenWorldHint {
		t.Errorf("run_python's title %q and hints %+v: want Run Python, not read-only, open world", tool.Title, a)
	}
	tool.Title, tool.Annotations = "", mcp.ToolAnnotation{}
	def, _ := json.Marshal(tool)
	// 1,200 until issue 39 added cancel (stopping a run in flight).
	if len(def) >= 1300 {
		t.Fatalf("the run_python definition is %d characters, want < 1300:\n%s", len(def), def)
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
	o := harness.Code(t, c, "print(runtime.capability_summary())\nimport mcp.runtime as rt\nprint(rt is runtime)")
	if out := harness.Joined(o.Stdout()); !strings.Contains(out, "save_memory") || !strings.HasSuffix(out, "True") {
		t.Fatalf("capability_summary() output:\n%s", out)
	}
	// Validation and clamping are upstream's.
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"code": "  "}, "Missing 'code' argument"},
		{map[string]any{"code": "pass", "servers": "github"}, "'servers' must be a list"},
		{map[string]any{"code": "pass", "timeout": "soon"}, "'timeout' must be a number of seconds from 1 to 3600 (fractions accepted), not the string \"soon\""},
	} {
		o := harness.RunPython(t, c, tc.args)
		if !o.IsError || o.Str("status") != "validation_error" || !strings.Contains(o.Text, tc.want) {
			t.Errorf("run_python(%v) = %s (%v), want validation_error %q", tc.args, o.Text, o.Structured, tc.want)
		}
	}
	o = harness.RunPython(t, c, map[string]any{"code": "pass", "servers": []any{"nope"}})
	if !o.IsError || !strings.Contains(o.Text, `unknown MCP server "nope"`) {
		t.Fatalf("unknown server: %s", o.Text)
	}
}

func TestE2EToonOutput(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, map[string]string{"MCP_BRIDGE_OUTPUT_MODE": "toon"})
	o := harness.Code(t, c, "print('line1'); print('line2')")
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

// TestE2EUnknownOutputModeWarns sets MCP_BRIDGE_OUTPUT_MODE to values
// upstream did not know: the result is TOON, as upstream renders for any
// value but compact, so a client config written for it keeps working, and
// the log warns with the setting, the value and what is accepted. The
// known values warn of nothing.
func TestE2EUnknownOutputModeWarns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode string
		warn bool
	}{{"compct", true}, {"json", true}, {"toon", false}, {"compact", false}} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			c, logs := harness.StartStdio(t, map[string]string{"MCP_BRIDGE_OUTPUT_MODE": tc.mode})
			o := harness.Code(t, c, "print('hi')")
			if toon := strings.HasPrefix(o.Text, "```toon\n"); toon != (tc.mode != "compact") {
				t.Errorf("MCP_BRIDGE_OUTPUT_MODE=%s rendered:\n%s", tc.mode, o.Text)
			}
			warned := strings.Contains(logs.String(), `level=WARN msg="unknown output mode; rendering TOON, as upstream does for any value but compact"`) &&
				strings.Contains(logs.String(), `setting="MCP_BRIDGE_OUTPUT_MODE (--output-mode)" value=`+tc.mode+` accepted="compact, toon"`)
			if warned != tc.warn {
				t.Errorf("MCP_BRIDGE_OUTPUT_MODE=%s: warned %v, want %v; log:\n%s", tc.mode, warned, tc.warn, harness.TailOf(logs.String(), 3000))
			}
		})
	}
}

func TestE2EProgressArrivesBeforeResult(t *testing.T) {
	t.Parallel()
	base := harness.StartAuthHTTP(t, map[string]string{"CODEEXEC_TOKENS_FILE": harness.TokensFile(t, map[string]string{"alpha-token": "alpha"})})
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
	addr := harness.FreeAddr(t)
	base := "http://" + addr
	logs := &harness.LockedBuffer{}
	cmd := exec.Command(harness.Binary, "serve", "--http", addr, "--shutdown-grace", "60s")
	cmd.Env = harness.BaseEnv(t, map[string]string{
		"CODEEXEC_TOKENS_FILE": harness.TokensFile(t, map[string]string{"alpha-token": "alpha"}),
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
			t.Logf("codeexec output:\n%s", harness.TailOf(logs.String(), 8000))
		}
	})
	harness.WaitHTTP(t, base+"/healthz")
	c, late := tokenClient(t, base, "alpha-token"), tokenClient(t, base, "alpha-token")
	// The upstream server runs, and so does a detached sandbox child.
	o := harness.RunPython(t, c, map[string]any{"code": "print(await mcp_memory.read_graph())", "servers": []any{"memory"}})
	if o.IsError || len(markedProcesses(mark)) == 0 {
		t.Fatalf("the memory server is not running (%s), so the orphan check proves nothing", o.Text)
	}
	harness.Code(t, late, "pass")

	result := make(chan harness.Outcome, 1)
	go func() {
		result <- harness.RunPython(t, c, map[string]any{"code": fmt.Sprintf(`
import subprocess, time
subprocess.Popen(["sleep", "%s"], start_new_session=True)
time.sleep(3)
print("finished")`, sleepMark)})
	}()
	for len(processesWithArg(sleepMark)) == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(harness.InterruptSignal); err != nil {
		t.Fatal(err)
	}
	// New calls are refused while the running one finishes. A call may
	// still get in before the signal is handled; the next ones may not.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		o := harness.RunPython(t, late, map[string]any{"code": "print('late')"})
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
	if o := <-result; o.IsError || harness.Joined(o.Stdout()) != "finished" {
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

// TestE2EHTTPPortInUseFailsBeforeAnythingStarts holds the port codeexec
// is told to serve on: it exits at once, naming the address and the cause,
// before any sandbox starts or the database is opened.
func TestE2EHTTPPortInUseFailsBeforeAnythingStarts(t *testing.T) {
	t.Parallel()
	// The test binds the port itself and holds it from the start, so the
	// kernel's choice is safe here: harness.FreeAddr's ports are for
	// servers told their port before they bind it. (With FreeAddr, a port
	// free when reserved was once taken by another process before this
	// Listen: 'bind: address already in use', under go test -race ./...)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Binary, "serve", "--http", addr)
	cmd.Env = harness.BaseEnv(t, nil)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("codeexec serve on a port in use exited 0:\n%s", out)
	}
	text := string(out)
	for _, want := range []string{"listen for MCP over HTTP on " + addr, "address already in use"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	for _, started := range []string{"memory database opened", "sessions are durable", "codeexec serving"} {
		if strings.Contains(text, started) {
			t.Errorf("output shows %q: the port was bound after the services started:\n%s", started, text)
		}
	}
}

// TestE2EHTTPPortZeroServesOnTheChosenPort asks for port 0: the log's
// "codeexec serving" line names the port the kernel chose, and MCP is
// served there.
func TestE2EHTTPPortZeroServesOnTheChosenPort(t *testing.T) {
	t.Parallel()
	logs := harness.StartProcess(t, harness.BaseEnv(t, nil), "serve", "--http", "127.0.0.1:0")
	serving := regexp.MustCompile(`msg="codeexec serving" .*transport=http address=(127\.0\.0\.1:\d+)`)
	var addr string
	for deadline := time.Now().Add(60 * time.Second); addr == ""; time.Sleep(50 * time.Millisecond) {
		if m := serving.FindStringSubmatch(logs.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no \"codeexec serving\" line with an address within 60s:\n%s", logs.String())
		}
	}
	if strings.HasSuffix(addr, ":0") {
		t.Fatalf("the log names port 0, not the port bound: %s", addr)
	}
	c := harness.HTTPClient(t, "http://"+addr)
	if got := harness.Joined(harness.Code(t, c, "print(6 * 7)").Stdout()); got != "42" {
		t.Fatalf("run_python on the chosen port printed %q", got)
	}
}

// TestE2EHTTPGetWithoutSessionSaysWhatToDo opens the event stream as a
// client of the old HTTP+SSE transport (2024-11-05) does, with a GET and
// no MCP session: it gets 400 and what to configure. Before, it got 200
// and a stream of a new, empty session that nothing was ever sent on, so
// such a client (the TypeScript SDK's SSEClientTransport) waited for its
// endpoint event forever. A GET in an MCP session still opens its stream.
func TestE2EHTTPGetWithoutSessionSaysWhatToDo(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, nil)
	get := func(header map[string]string) (reply, string) {
		header["Accept"] = "text/event-stream"
		return rawRequest(t, http.MethodGet, base+"/mcp", "", header)
	}
	resp, body := get(map[string]string{})
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("GET /mcp without a session = %d %s; want 400, not a stream that an HTTP+SSE client waits on forever", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{"no Mcp-Session-Id header", "POSTs initialize first", `older HTTP+SSE transport (type "sse"`, `streamable HTTP (type "http"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the answer lacks %q:\n%s", want, body)
		}
	}
	r, _ := rawInitialize(t, base, nil)
	resp, body = get(map[string]string{"Mcp-Session-Id": r.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": "2025-06-18"})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /mcp in an MCP session = %d %s %q; want its event stream", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}
