package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/gateway/internal/capabilities"
	"github.com/codeexec/codeexec/gateway/internal/runpython"
	"github.com/codeexec/codeexec/gateway/internal/sessions"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

func TestSessionPerClient(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	c1, c2 := connect(t, g), connect(t, g)
	for range 2 {
		call(t, c1, ToolName, map[string]any{"code": "a"})
		call(t, c2, ToolName, map[string]any{"code": "b"})
	}
	created, _, execs := f.snapshot()
	if len(created) != 2 {
		t.Fatalf("created %d sandbox sessions for two clients, want 2", len(created))
	}
	if created[0].GetLabels()[sessions.LabelMCPSession] == created[1].GetLabels()[sessions.LabelMCPSession] {
		t.Errorf("both sandbox sessions carry MCP session label %q", created[0].GetLabels()[sessions.LabelMCPSession])
	}
	bySession := map[string][]string{}
	for _, e := range execs {
		bySession[e.GetSessionId()] = append(bySession[e.GetSessionId()], e.GetCode())
	}
	if len(bySession) != 2 || strings.Join(bySession["sbx-1"], "")+strings.Join(bySession["sbx-2"], "") != "aabb" &&
		strings.Join(bySession["sbx-1"], "")+strings.Join(bySession["sbx-2"], "") != "bbaa" {
		t.Errorf("executions by session = %v, want each client on its own session", bySession)
	}

	// Ending one MCP session destroys its sandbox session only.
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	_, destroyed, _ := f.snapshot()
	if len(destroyed) != 1 || f.liveCount() != 1 {
		t.Fatalf("after closing one client: destroyed %v, %d live; want 1 destroyed, 1 live", destroyed, f.liveCount())
	}
	call(t, c2, ToolName, map[string]any{"code": "b"})
	if created, _, _ := f.snapshot(); len(created) != 2 {
		t.Errorf("the remaining client got a new sandbox session")
	}
}

func TestConcurrentFirstCallsShareOneSession(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	c := connect(t, g)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			res, err := c.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{
				Name: ToolName, Arguments: map[string]any{"code": "x"}}})
			if err != nil || res.IsError {
				t.Errorf("call: %v %+v", err, res)
			}
		})
	}
	wg.Wait()
	if created, _, _ := f.snapshot(); len(created) != 1 {
		t.Errorf("created %d sandbox sessions, want 1", len(created))
	}
}

func TestSessionLostIsRecovered(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	c := connect(t, g)
	call(t, c, ToolName, map[string]any{"code": "x = 1"})
	f.forget() // sandboxd restarted
	res := call(t, c, ToolName, map[string]any{"code": "print(x)"})
	if res.IsError {
		t.Fatalf("isError after recovery: %s", textOf(t, res))
	}
	// The notice carries sandboxd's reason.
	want := "print(x)\nstderr:\n[session lost; started a new session — earlier state is gone (session \"sbx-1\" not found)]"
	if got := textOf(t, res); got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	created, _, execs := f.snapshot()
	if len(created) != 2 || execs[len(execs)-1].GetSessionId() != "sbx-2" {
		t.Errorf("created %d sessions, last exec on %q; want 2 and sbx-2", len(created), execs[len(execs)-1].GetSessionId())
	}
	// The next call is quiet again.
	if got := textOf(t, call(t, c, ToolName, map[string]any{"code": "y"})); got != "y" {
		t.Errorf("text after recovery = %q, want %q", got, "y")
	}
}

func TestGenerationChange(t *testing.T) {
	t.Parallel()
	timeout := done(&sandboxv1.ExecResult{Status: sandboxv1.ExecStatus_EXEC_STATUS_TIMEOUT, StateLost: true})
	restored := done(&sandboxv1.ExecResult{Status: sandboxv1.ExecStatus_EXEC_STATUS_OK,
		Restored: &sandboxv1.RestoreReport{Reason: "the previous call's sandbox stopped", Names: []string{"x"}}})
	tests := []struct {
		name  string
		first []*sandboxv1.ExecuteResponse
		// second answers the call after the generation changed; nil: OK.
		second     []*sandboxv1.ExecuteResponse
		wantNotice bool
	}{
		{name: "silent reset is reported", first: []*sandboxv1.ExecuteResponse{done(okRes())}, wantNotice: true},
		{name: "reset after a timeout was already reported", first: []*sandboxv1.ExecuteResponse{timeout}, wantNotice: false},
		{name: "restore says what came back", first: []*sandboxv1.ExecuteResponse{done(okRes())},
			second: []*sandboxv1.ExecuteResponse{restored}, wantNotice: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, f := newTestGateway(t, Config{})
			c := connect(t, g)
			f.setGeneration(1)
			f.setRespond(script(tt.first, nil))
			call(t, c, ToolName, map[string]any{"code": "x = 1"})
			f.setGeneration(2)
			f.setRespond(nil)
			if tt.second != nil {
				f.setRespond(script(tt.second, nil))
			}
			got := textOf(t, call(t, c, ToolName, map[string]any{"code": "z"}))
			if has := strings.Contains(got, runpython.NoticeSilentReset); has != tt.wantNotice {
				t.Errorf("text = %q; notice present = %v, want %v", got, has, tt.wantNotice)
			}
		})
	}
}

func TestCreateSessionFailureIsRetried(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	c := connect(t, g)
	f.setCreateErr(status.Error(codes.Unavailable, "connection refused"))
	res := call(t, c, ToolName, map[string]any{"code": "1"})
	if !res.IsError || !strings.HasPrefix(structured(t, res)["summary"].(string), "Sandbox error: the sandbox service is unreachable") {
		t.Fatalf("result = %+v, want an unreachable sandbox error", structured(t, res))
	}
	f.setCreateErr(nil)
	if res := call(t, c, ToolName, map[string]any{"code": "1"}); res.IsError {
		t.Errorf("second call failed: %s", textOf(t, res))
	}
}

func TestCloseDestroysSessions(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	c1, c2 := connect(t, g), connect(t, g)
	call(t, c1, ToolName, map[string]any{"code": "1"})
	call(t, c2, ToolName, map[string]any{"code": "2"})
	if f.liveCount() != 2 {
		t.Fatalf("%d live sandbox sessions, want 2", f.liveCount())
	}
	if err := g.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f.liveCount() != 0 || g.sessions.Count() != 0 {
		t.Errorf("after Close: %d live sandbox sessions, %d tracked; want 0", f.liveCount(), g.sessions.Count())
	}
	res := call(t, c1, ToolName, map[string]any{"code": "1"})
	if !res.IsError || !strings.Contains(textOf(t, res), "shutting down") {
		t.Errorf("call after Close = %q, want a shutting-down error", textOf(t, res))
	}
}

func TestResources(t *testing.T) {
	t.Parallel()
	g, _ := newTestGateway(t, Config{})
	c := connect(t, g)
	list, err := c.ListResources(t.Context(), mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Resources) != 1 {
		t.Fatalf("resources = %+v, want one", list.Resources)
	}
	r := list.Resources[0]
	if r.URI != CapabilitiesURI || r.Name != "code-execution-capabilities" || r.Title != "Code Execution Sandbox Helpers" ||
		r.MIMEType != "text/markdown" || r.Size == nil || *r.Size != int64(len(capabilities.Text)) {
		t.Errorf("resource = %+v", r)
	}

	read, err := c.ReadResource(t.Context(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: CapabilitiesURI}})
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Contents) != 1 {
		t.Fatalf("contents = %+v, want one", read.Contents)
	}
	text, ok := read.Contents[0].(mcp.TextResourceContents)
	if !ok {
		t.Fatalf("content is %T", read.Contents[0])
	}
	for _, want := range []string{"# Code Execution MCP Capabilities", HelperSummary, "servers=[", "import mcp.runtime as runtime",
		"_sync", "cwd", "describe_server", "list_loaded_server_metadata", "print(runtime.capability_summary())", CapabilitiesURI} {
		if !strings.Contains(text.Text, want) {
			t.Errorf("capabilities text lacks %q", want)
		}
	}
	if text.MIMEType != "text/markdown" {
		t.Errorf("mimeType = %q", text.MIMEType)
	}

	_, err = c.ReadResource(t.Context(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "resource://mcp-server-code-execution-mode/other"}})
	if err == nil {
		t.Error("reading an unknown URI succeeded, want an error")
	}
}

func TestProgressNotifications(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	c := connect(t, g)
	var mu sync.Mutex
	var got []mcp.JSONRPCNotification
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, n)
	})
	f.setRespond(script([]*sandboxv1.ExecuteResponse{
		out(sandboxv1.Stream_STREAM_STDOUT, "step 1\n"), out(sandboxv1.Stream_STREAM_STDOUT, "step 2\n"), done(okRes()),
	}, nil))
	res, err := c.CallTool(t.Context(), mcp.CallToolRequest{Params: mcp.CallToolParams{
		Name: ToolName, Arguments: map[string]any{"code": "..."}, Meta: &mcp.Meta{ProgressToken: "tok-1"}}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	// Notifications travel apart from the response; give them a moment.
	var progress []map[string]any
	for deadline := time.Now().Add(5 * time.Second); len(progress) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		for _, n := range got {
			if n.Method == "notifications/progress" {
				progress = append(progress, n.Params.AdditionalFields)
			}
		}
		mu.Unlock()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) == 0 {
		t.Fatalf("no progress notifications among %+v", got)
	}
	if progress[0]["progressToken"] != "tok-1" || progress[0]["message"] != "step 1" {
		t.Errorf("first progress = %v, want token tok-1 and message %q", progress[0], "step 1")
	}
}

// TestNoSessionRunsEphemeral covers a request that reaches the tool without
// an MCP session (a stateless client): it runs in a throwaway sandbox.
func TestNoSessionRunsEphemeral(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"hi"}}}`
	resp := g.MCPServer().HandleMessage(t.Context(), []byte(msg))
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"hi\nstderr:\n[no MCP session: this call ran in a fresh sandbox, and its state is not kept]"`) {
		t.Errorf("response = %s", b)
	}
	created, destroyed, _ := f.snapshot()
	if len(created) != 1 || len(destroyed) != 1 || g.sessions.Count() != 0 {
		t.Errorf("created %d, destroyed %d, tracked %d; want 1, 1, 0", len(created), len(destroyed), g.sessions.Count())
	}
}

func TestRequestIDReachesSandbox(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	c := connect(t, g)
	call(t, c, ToolName, map[string]any{"code": "1"})
	call(t, c, ToolName, map[string]any{"code": "2"})
	f.mu.Lock()
	ids := append([]string(nil), f.requestIDs...)
	f.mu.Unlock()
	if len(ids) != 2 || ids[0] == "" || ids[0] == ids[1] {
		t.Errorf("request IDs seen by sandboxd = %q, want two distinct IDs", ids)
	}
}
