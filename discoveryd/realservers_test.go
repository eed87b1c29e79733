package discoveryd_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	"github.com/codeexec/codeexec/services/testport"
)

// realServers configures the three npm servers; the filesystem server may
// read dir.
func realServers(t *testing.T, dir string) map[string]any {
	mem := stdio(t, "server-memory")
	mem["env"] = map[string]any{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}
	return map[string]any{
		"everything": stdio(t, "server-everything", "stdio"),
		"filesystem": stdio(t, "server-filesystem", dir),
		"memory":     mem,
	}
}

func toolNames(resp *discoveryv1.ListToolsResponse) []string {
	var out []string
	for _, t := range resp.GetTools() {
		out = append(out, t.GetName())
	}
	return out
}

func TestRealServersListAndCall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "hello.txt")
	if err := os.WriteFile(file, []byte("hello from a temp file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := start(t, realServers(t, dir), nil)
	ctx := t.Context()

	want := map[string][]string{
		"everything": {"echo", "get-sum", "trigger-long-running-operation"},
		"filesystem": {"read_text_file", "list_directory", "write_file"},
		"memory":     {"create_entities", "read_graph", "search_nodes"},
	}
	for server, tools := range want {
		resp, err := e.client.ListTools(ctx, &discoveryv1.ListToolsRequest{Server: server})
		if err != nil {
			t.Fatalf("ListTools(%s): %v", server, err)
		}
		for _, name := range tools {
			if !slices.Contains(toolNames(resp), name) {
				t.Errorf("%s tools %v lack %q", server, toolNames(resp), name)
			}
		}
		if resp.GetServer().GetStatus() != discoveryv1.ServerStatus_SERVER_STATUS_RUNNING {
			t.Errorf("%s status = %v, want running", server, resp.GetServer().GetStatus())
		}
		for _, tool := range resp.GetTools() {
			if !strings.HasPrefix(tool.GetInputSchemaJson(), "{") || !strings.Contains(tool.GetToolJson(), `"name"`) {
				t.Errorf("%s/%s: schema %q, tool %q", server, tool.GetName(), tool.GetInputSchemaJson(), tool.GetToolJson())
			}
			if tool.GetName() == "get-sum" && tool.GetAlias() != "get_sum" {
				t.Errorf("alias of get-sum = %q, want get_sum", tool.GetAlias())
			}
		}
	}

	calls := []struct {
		server, tool, args string
		want               string
		isError            bool
	}{
		{"filesystem", "read_text_file", fmt.Sprintf(`{"path": %q}`, file), "hello from a temp file", false},
		{"everything", "echo", `{"message": "ping"}`, "Echo: ping", false},
		{"everything", "get_sum", `{"a": 2, "b": 40}`, "42", false}, // by alias
		{"memory", "create_entities", `{"entities": [{"name": "codeexec", "entityType": "project", "observations": ["written in Go"]}]}`, "codeexec", false},
		{"memory", "read_graph", ``, "written in Go", false},
		// The tool ran and failed: a result with isError, not an RPC error.
		{"filesystem", "read_text_file", `{"path": "/etc/passwd"}`, "denied", true},
	}
	for _, c := range calls {
		resp, err := e.client.CallTool(ctx, &discoveryv1.CallToolRequest{Server: c.server, Tool: c.tool, ArgumentsJson: c.args})
		if err != nil {
			t.Fatalf("CallTool(%s, %s): %v", c.server, c.tool, err)
		}
		r := decode(t, resp)
		if !strings.Contains(strings.ToLower(r.text()), strings.ToLower(c.want)) || r.IsError != c.isError {
			t.Errorf("CallTool(%s, %s) = %q (isError %v), want %q (isError %v)", c.server, c.tool, r.text(), r.IsError, c.want, c.isError)
		}
	}

	// Only the servers that ran are running; Close leaves no process.
	if len(marked(e.mark)) == 0 {
		t.Fatal("no server process carries the test mark; the leak check below would prove nothing")
	}
	e.close(t)
	if left := marked(e.mark); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
	}
}

func TestRealParallelCalls(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]any{"everything": stdio(t, "server-everything", "stdio")}, nil)
	ctx := t.Context()
	if _, err := e.client.ListTools(ctx, &discoveryv1.ListToolsRequest{Server: "everything"}); err != nil {
		t.Fatal(err)
	}
	const n, secs = 4, 2
	begin := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			resp, err := e.client.CallTool(ctx, &discoveryv1.CallToolRequest{Server: "everything", Tool: "trigger-long-running-operation",
				ArgumentsJson: fmt.Sprintf(`{"duration": %d, "steps": 2}`, secs)})
			if err == nil && !strings.Contains(decode(t, resp).text(), "completed") {
				err = fmt.Errorf("unexpected result %s", resp.GetResultJson())
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	wall := time.Since(begin)
	if wall > time.Duration(secs)*time.Second*3/2 {
		t.Errorf("%d parallel %ds calls took %s; want about %ds (the longest), not %ds (the sum)", n, secs, wall, secs, n*secs)
	}
	t.Logf("%d parallel %ds calls took %s", n, secs, wall)
}

// TestRealHTTPTransports reaches server-everything over streamable HTTP and
// over the older HTTP+SSE transport, configured by url.
func TestRealHTTPTransports(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode, typ, path string
		want            discoveryv1.Transport
	}{
		{"streamableHttp", "http", "/mcp", discoveryv1.Transport_TRANSPORT_STREAMABLE_HTTP},
		{"sse", "sse", "/sse", discoveryv1.Transport_TRANSPORT_SSE},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			addr := serveEverything(t, tc.mode)
			e := start(t, map[string]any{"remote": map[string]any{"type": tc.typ, "url": "http://" + addr + tc.path, "headers": map[string]any{"X-Test": "1"}}}, nil)
			ctx := t.Context()
			servers, err := e.client.ListServers(ctx, &discoveryv1.ListServersRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if got := servers.GetServers()[0].GetTransport(); got != tc.want {
				t.Errorf("transport = %v, want %v", got, tc.want)
			}
			tools, err := e.client.ListTools(ctx, &discoveryv1.ListToolsRequest{Server: "remote"})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(toolNames(tools), "echo") {
				t.Errorf("tools over %s %v lack echo", tc.mode, toolNames(tools))
			}
			resp, err := e.client.CallTool(ctx, &discoveryv1.CallToolRequest{Server: "remote", Tool: "echo", ArgumentsJson: `{"message": "over http"}`})
			if err != nil {
				t.Fatal(err)
			}
			if got := decode(t, resp).text(); !strings.Contains(got, "over http") {
				t.Errorf("echo over %s = %q", tc.mode, got)
			}
		})
	}
}

// serveEverything runs server-everything in an HTTP mode on a free port
// until the test ends, and returns its address.
func serveEverything(t *testing.T, mode string) string {
	t.Helper()
	addr := testport.Addr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(node(t), npmServer(t, "server-everything"), mode)
	cmd.Env = append(os.Environ(), "PORT="+port)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(20 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything %s did not listen on %s: %v", mode, addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestCrashMidCallAndRestart(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]any{"fake": fakeServer(t)}, nil)
	ctx := t.Context()
	_, err := e.client.CallTool(ctx, &discoveryv1.CallToolRequest{Server: "fake", Tool: "crash", ArgumentsJson: `{"code": 7}`})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("crash: %v, want Unavailable", err)
	}
	for _, w := range []string{"exit status 7", "crashing on purpose", "restarts on the next call"} {
		if !strings.Contains(status.Convert(err).Message(), w) {
			t.Errorf("crash message %q lacks %q", status.Convert(err).Message(), w)
		}
	}
	servers, err := e.client.ListServers(ctx, &discoveryv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if s := servers.GetServers()[0]; s.GetStatus() != discoveryv1.ServerStatus_SERVER_STATUS_FAILED || !strings.Contains(s.GetLastError(), "exit status 7") {
		t.Errorf("after the crash: status %v, last error %q", s.GetStatus(), s.GetLastError())
	}
	resp, err := e.client.CallTool(ctx, &discoveryv1.CallToolRequest{Server: "fake", Tool: "echo", ArgumentsJson: `{"text": "alive again"}`})
	if err != nil {
		t.Fatalf("call after the crash: %v", err)
	}
	if got := decode(t, resp).text(); got != "alive again" {
		t.Errorf("echo after restart = %q", got)
	}
}
