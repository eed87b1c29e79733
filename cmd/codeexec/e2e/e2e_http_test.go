package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/grpctls/grpctlstest"
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

// The services run as separate processes over gRPC, as the README shows.
func TestE2ESplitServices(t *testing.T) {
	t.Parallel()
	env := baseEnv(t, nil)
	dir := t.TempDir()
	memSock := "unix:" + dir + "/memoryd.sock"
	sbAddr, sbMetrics, gwAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	startProcess(t, env, "memoryd", "--listen", memSock, "--db", dir+"/codeexec.db", "--metrics", "")
	waitHealth(t, memSock)
	startProcess(t, env, "sandboxd", "--listen", sbAddr, "--memory-addr", memSock, "--metrics", sbMetrics, "--pool", "1")
	waitHealth(t, sbAddr)
	startProcess(t, env, "gateway", "--sandbox", sbAddr, "--http", gwAddr)
	base := "http://" + gwAddr
	waitHTTP(t, base+"/healthz")

	c := httpClient(t, base)
	code(t, c, "n = 20")
	if got := joined(code(t, c, "print(n + 22)").stdout()); got != "42" {
		t.Fatalf("split services: stdout = %q", got)
	}
	if got := metric(t, "http://"+sbMetrics, `codeexec_sandbox_exec_seconds_count{status="ok"}`); got != 2 {
		t.Fatalf("sandboxd counted %v ok execs, want 2", got)
	}
	// Server reflection lists the service, as grpcurl needs.
	conn, err := grpc.NewClient(sbAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	refl, err := rc.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var services []string
	for _, s := range refl.GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
	}
	if !slices.Contains(services, "codeexec.sandbox.v1.SandboxService") || !slices.Contains(services, "grpc.health.v1.Health") {
		t.Fatalf("reflection lists %v", services)
	}
	out, err := exec.Command(binary, "health", sbAddr).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "SERVING" {
		t.Fatalf("codeexec health %s: %s, %v", sbAddr, out, err)
	}
}

// TestE2ESplitServicesMutualTLS runs memoryd, sandboxd and the gateway as
// separate processes over TCP with mutual TLS, each with its own
// certificate: a call that uses memory crosses both links, and the health
// check answers only a client whose certificate the services' CA signed.
func TestE2ESplitServicesMutualTLS(t *testing.T) {
	t.Parallel()
	env := baseEnv(t, nil)
	dir := t.TempDir()
	ca := grpctlstest.NewCA(t, "codeexec")
	memAddr, sbAddr, gwAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	startProcess(t, env, append([]string{"memoryd", "--listen", memAddr, "--db", dir + "/codeexec.db", "--metrics", ""}, grpctlstest.Args(ca.Issue(t, "memoryd"))...)...)
	probe := grpctlstest.Args(ca.Issue(t, "probe"))
	waitHealth(t, memAddr, probe...)
	startProcess(t, env, append([]string{"sandboxd", "--listen", sbAddr, "--memory-addr", memAddr, "--metrics", "", "--pool", "1"}, grpctlstest.Args(ca.Issue(t, "sandboxd"))...)...)
	waitHealth(t, sbAddr, probe...)
	startProcess(t, env, append([]string{"gateway", "--sandbox", sbAddr, "--http", gwAddr}, grpctlstest.Args(ca.Issue(t, "gateway"))...)...)
	base := "http://" + gwAddr
	waitHTTP(t, base+"/healthz")

	c := httpClient(t, base)
	code(t, c, `save_memory("over-tls", {"ok": True})`)
	if got := joined(code(t, c, `print(load_memory("over-tls"))`).stdout()); got != "{'ok': True}" {
		t.Fatalf("memory through gateway → sandboxd → memoryd over mutual TLS: %q", got)
	}

	rogue := grpctlstest.Args(grpctlstest.NewCA(t, "rogue").Issue(t, "intruder"))
	for name, args := range map[string][]string{"plaintext": nil, "a certificate from another CA": rogue} {
		out, err := exec.Command(binary, append(append([]string{"health"}, args...), sbAddr)...).CombinedOutput()
		if err == nil {
			t.Errorf("health check of sandboxd with %s succeeded: %s", name, out)
		}
	}
	out, err := exec.Command(binary, append(append([]string{"health"}, probe...), memAddr)...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "SERVING" {
		t.Errorf("health check of memoryd with the CA's certificate: %s, %v", out, err)
	}
	out, err = exec.Command(binary, "health", "--grpc-tls-cert", probe[1], memAddr).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "missing --grpc-tls-key, --grpc-tls-ca") {
		t.Errorf("health check with a certificate but no key or CA: %s, %v", out, err)
	}
}

func waitHealth(t *testing.T, addr string, tlsArgs ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command(binary, append(append([]string{"health"}, tlsArgs...), addr)...).CombinedOutput()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became healthy: %s", addr, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// SIGTERM to a split sandboxd lets a running execution finish.
func TestE2ESplitSandboxdDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	cmd := exec.Command(binary, "sandboxd", "--listen", addr, "--metrics", "", "--pool", "0", "--shutdown-grace", "60s")
	cmd.Env = baseEnv(t, nil)
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("sandboxd output:\n%s", tailOf(logs.String(), 4000))
		}
	})
	waitHealth(t, addr)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := sandboxv1.NewSandboxServiceClient(conn)
	s, err := c.CreateSession(t.Context(), &sandboxv1.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := c.Execute(t.Context(), &sandboxv1.ExecuteRequest{SessionId: s.GetSession().GetId(), Code: "import time\nprint('start', flush=True)\ntime.sleep(2)\nprint('finished')"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil || first.GetOutput().GetText() != "start\n" {
		t.Fatalf("first event = %v, %v", first, err)
	}
	if err := cmd.Process.Signal(interruptSignal); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("the running execution was cut off by SIGTERM: %v (output so far %q)", err, out.String())
		}
		out.WriteString(ev.GetOutput().GetText())
		if r := ev.GetResult(); r != nil {
			if r.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK || out.String() != "finished\n" {
				t.Fatalf("result %v, output %q", r, out.String())
			}
			break
		}
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("sandboxd exited with %v after draining", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("sandboxd did not exit after draining")
	}
}
