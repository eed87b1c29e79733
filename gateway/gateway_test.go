package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/codeexec/codeexec/gateway/internal/sessions"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "zero is defaults", cfg: Config{}},
		{name: "default above max is clamped later", cfg: Config{DefaultTimeout: 300 * time.Second}},
		{name: "negative timeout", cfg: Config{DefaultTimeout: -time.Second}, wantErr: "MCP_BRIDGE_TIMEOUT"},
		{name: "sub-second max", cfg: Config{MaxTimeout: time.Millisecond}, wantErr: "MCP_BRIDGE_MAX_TIMEOUT"},
		{name: "negative output limit", cfg: Config{OutputLimitBytes: -1}, wantErr: "output limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if (err != nil) != (tt.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestServerInfo(t *testing.T) {
	t.Parallel()
	g, _ := newTestGateway(t, Config{Version: "1.2.3"})
	c, err := client.NewInProcessClient(g.MCPServer())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res := initialize(t, c)
	if res.ServerInfo.Name != ServerName || res.ServerInfo.Version != "1.2.3" {
		t.Errorf("serverInfo = %+v, want %s 1.2.3", res.ServerInfo, ServerName)
	}
	if res.Capabilities.Tools == nil || res.Capabilities.Resources == nil {
		t.Errorf("capabilities = %+v, want tools and resources", res.Capabilities)
	}
}

// TestToolDefinition checks the one tool and keeps what the model reads
// of it on every turn (name, description, input schema; the title and
// the hints are for the client) under 1,200 JSON characters.
func TestToolDefinition(t *testing.T) {
	t.Parallel()
	g, _ := newTestGateway(t, Config{MaxTimeout: 90 * time.Second})
	c := connect(t, g)
	list, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 1 || list.Tools[0].Name != ToolName {
		t.Fatalf("tools = %+v, want only %s", list.Tools, ToolName)
	}
	a := list.Tools[0].Annotations
	if list.Tools[0].Title != "Run Python" || a.ReadOnlyHint == nil || *a.ReadOnlyHint || a.OpenWorldHint == nil || !*a.OpenWorldHint ||
		a.DestructiveHint == nil || !*a.DestructiveHint || a.IdempotentHint == nil || *a.IdempotentHint {
		t.Errorf("title %q, annotations %+v: want a title and the hints not read-only, destructive, not idempotent, open world",
			list.Tools[0].Title, a)
	}
	read := list.Tools[0]
	read.Title, read.Annotations = "", mcp.ToolAnnotation{}
	def, err := json.Marshal(read)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tool definition: %d characters: %s", len(def), def)
	// 1,200 until issue 39 added cancel (stopping a run in flight).
	if len(def) >= 1300 {
		t.Errorf("tool definition is %d characters, want < 1300", len(def))
	}
	var tool struct {
		Description string `json:"description"`
		InputSchema struct {
			Required   []string                  `json:"required"`
			Properties map[string]map[string]any `json:"properties"`
		} `json:"inputSchema"`
	}
	if err := json.Unmarshal(def, &tool); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"persist", "mcp_<alias>", "print(runtime.capability_summary())", CapabilitiesURI} {
		if !strings.Contains(tool.Description, want) {
			t.Errorf("description lacks %q", want)
		}
	}
	props := tool.InputSchema.Properties
	if diff := cmp.Diff([]string{"code"}, tool.InputSchema.Required); diff != "" {
		t.Errorf("required (-want +got):\n%s", diff)
	}
	if props["code"]["type"] != "string" || props["servers"]["type"] != "array" || props["timeout"]["type"] != "number" {
		t.Errorf("property types = %v", props)
	}
	if props["timeout"]["minimum"] != 1.0 || props["timeout"]["maximum"] != 90.0 || props["timeout"]["default"] != 30.0 {
		t.Errorf("timeout = %v, want 1..90, default 30", props["timeout"])
	}
	desc, _ := props["code"]["description"].(string)
	for _, want := range []string{"runtime.discovered_servers()", "await runtime.search_tool_docs(", "await runtime.query_tool_docs(", "save_memory(", "load_memory(", "save_tool("} {
		if !strings.Contains(desc, want) {
			t.Errorf("code description %q lacks %q", desc, want)
		}
	}
	// A default above the maximum is advertised clamped.
	g2, _ := newTestGateway(t, Config{DefaultTimeout: 60 * time.Second, MaxTimeout: 20 * time.Second})
	list2, err := connect(t, g2).ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(list2.Tools[0]); !strings.Contains(string(got), `"timeout":{"default":20,`) || !strings.Contains(string(got), `"maximum":20,`) {
		t.Errorf("schema with default 60s, max 20s: %s", got)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	c := connect(t, g)
	tests := []struct {
		name string
		args any
		want string
	}{
		{"no arguments", nil, "Missing 'code' argument"},
		{"blank code", map[string]any{"code": "  \n"}, "Missing 'code' argument"},
		{"code a number", map[string]any{"code": 42}, "'code' must be a string of Python source, not a number"},
		{"servers not a list", map[string]any{"code": "1", "servers": "github"}, "'servers' must be a list"},
		{"timeout zero", map[string]any{"code": "1", "timeout": 0}, "'timeout' must be a number of seconds from 1 to 3600 (fractions accepted), not 0"},
		{"timeout negative", map[string]any{"code": "1", "timeout": -5}, "'timeout' must be a number of seconds from 1 to 3600 (fractions accepted), not -5"},
		{"timeout above the maximum", map[string]any{"code": "1", "timeout": 100000}, "'timeout' must be a number of seconds from 1 to 3600 (fractions accepted), not 100000"},
		{"timeout bool", map[string]any{"code": "1", "timeout": true}, "'timeout' must be a number of seconds from 1 to 3600 (fractions accepted), not a boolean"},
		{"timeout string", map[string]any{"code": "1", "timeout": "5"}, "'timeout' must be a number of seconds from 1 to 3600 (fractions accepted), not the string \"5\""},
		{"unknown argument", map[string]any{"code": "1", "timeout_seconds": 5}, "run_python does not take \"timeout_seconds\"; it accepts: code, servers, timeout, session, cancel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, c, ToolName, tt.args)
			if !res.IsError {
				t.Error("isError = false, want true")
			}
			want := map[string]any{"status": "validation_error", "summary": tt.want, "error": tt.want}
			if diff := cmp.Diff(want, structured(t, res)); diff != "" {
				t.Errorf("structuredContent (-want +got):\n%s", diff)
			}
			// Upstream's compact text: status, summary, then the error
			// line, since the status is not "error" (L431-473).
			if got := textOf(t, res); got != "status: validation_error\n"+tt.want+"\nerror: "+tt.want {
				t.Errorf("text = %q", got)
			}
		})
	}
	if _, _, execs := f.snapshot(); len(execs) != 0 {
		t.Errorf("sandbox got %d Execute calls, want none", len(execs))
	}
}

func TestUnknownTool(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{})
	c := connect(t, g)
	res := call(t, c, "run_ruby", map[string]any{"code": "puts 1"})
	want := map[string]any{"status": "error", "summary": "Unknown tool: run_ruby", "error": "Unknown tool: run_ruby"}
	if diff := cmp.Diff(want, structured(t, res)); diff != "" {
		t.Errorf("structuredContent (-want +got):\n%s", diff)
	}
	if !res.IsError {
		t.Error("isError = false, want true")
	}
	// The reroute must not leak: run_python still runs normally.
	if got := textOf(t, call(t, c, ToolName, map[string]any{"code": "x"})); got != "x" {
		t.Errorf("run_python after unknown tool = %q, want %q", got, "x")
	}
	if _, _, execs := f.snapshot(); len(execs) != 1 {
		t.Errorf("sandbox got %d Execute calls, want 1", len(execs))
	}
}

func TestTimeouts(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{DefaultTimeout: 20 * time.Second, MaxTimeout: 60 * time.Second})
	c := connect(t, g)
	tests := []struct {
		name string
		args map[string]any
		want time.Duration
	}{
		{"default", map[string]any{"code": "1"}, 20 * time.Second},
		{"given", map[string]any{"code": "1", "timeout": 5}, 5 * time.Second},
		{"integral float", map[string]any{"code": "1", "timeout": 7.0}, 7 * time.Second},
		{"fraction", map[string]any{"code": "1", "timeout": 2.5}, 2500 * time.Millisecond},
		{"the maximum", map[string]any{"code": "1", "timeout": 60}, 60 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, c, ToolName, tt.args)
			if res.IsError {
				t.Fatalf("isError: %s", textOf(t, res))
			}
			_, _, execs := f.snapshot()
			if got := execs[len(execs)-1].GetTimeout().AsDuration(); got != tt.want {
				t.Errorf("sandbox got timeout %v, want %v", got, tt.want)
			}
		})
	}
}

func TestExecuteRequest(t *testing.T) {
	t.Parallel()
	g, f := newTestGateway(t, Config{Tenant: "acme"})
	c := connect(t, g)
	call(t, c, ToolName, map[string]any{"code": "print(1)", "servers": []any{"github", 2}})
	created, _, execs := f.snapshot()
	if len(created) != 1 || len(execs) != 1 {
		t.Fatalf("created %d sessions and %d execs, want 1 and 1", len(created), len(execs))
	}
	if created[0].GetTenant() != "acme" || created[0].GetLabels()[sessions.LabelMCPSession] == "" {
		t.Errorf("CreateSession = %v, want tenant acme and an %s label", created[0], sessions.LabelMCPSession)
	}
	got := execs[0]
	if got.GetTenant() != "acme" || got.GetCode() != "print(1)" || !cmp.Equal(got.GetServers(), []string{"github", "2"}) {
		t.Errorf("Execute = %v", got)
	}
}

func TestOutputs(t *testing.T) {
	t.Parallel()
	stdout := func(s string) *sandboxv1.ExecuteResponse { return out(sandboxv1.Stream_STREAM_STDOUT, s) }
	stderr := func(s string) *sandboxv1.ExecuteResponse { return out(sandboxv1.Stream_STREAM_STDERR, s) }
	lost := "The sandbox was stopped and the session state (variables, imports, functions) was lost; the next call starts fresh."
	tests := []struct {
		name           string
		mode           string
		limit          int64
		events         []*sandboxv1.ExecuteResponse
		rpcErr         error
		wantText       string
		wantStructured string
		wantIsError    bool
	}{
		{
			name:           "compact success",
			events:         []*sandboxv1.ExecuteResponse{stdout("alpha\n"), stdout("beta\n"), done(okRes())},
			wantText:       "alpha\nbeta",
			wantStructured: `{"stdout":["alpha","beta"]}`,
		},
		{
			name:           "compact no output",
			events:         []*sandboxv1.ExecuteResponse{done(okRes())},
			wantText:       "Success (no output)",
			wantStructured: `{"summary":"Success (no output)"}`,
		},
		{
			name:           "blank lines are kept, () is dropped",
			events:         []*sandboxv1.ExecuteResponse{stdout("a\n\n"), stdout("()\nb\n"), done(okRes())},
			wantText:       "a\n\nb",
			wantStructured: `{"stdout":["a","","b"]}`,
		},
		{
			name:           "toon success",
			mode:           "toon",
			events:         []*sandboxv1.ExecuteResponse{stdout("line1\nline2\n"), done(okRes())},
			wantText:       "```toon\nstatus: success\nsummary: Success\nexitCode: 0\nstdout[2]: line1,line2\n```",
			wantStructured: `{"status":"success","summary":"Success","exitCode":0,"stdout":["line1","line2"]}`,
		},
		{
			name: "exception",
			events: []*sandboxv1.ExecuteResponse{stderr("Traceback (most recent call last):\nZeroDivisionError: division by zero\n"),
				done(&sandboxv1.ExecResult{Status: sandboxv1.ExecStatus_EXEC_STATUS_ERROR, ExitCode: 1, Error: "ZeroDivisionError: division by zero"})},
			wantText: "status: error\nexit: 1\nstderr:\nTraceback (most recent call last):\nZeroDivisionError: division by zero",
			wantStructured: `{"status":"error","summary":"Error: ZeroDivisionError: division by zero","exitCode":1,` +
				`"stderr":["Traceback (most recent call last):","ZeroDivisionError: division by zero"],"error":"ZeroDivisionError: division by zero"}`,
			wantIsError: true,
		},
		{
			name: "toon timeout",
			mode: "toon",
			events: []*sandboxv1.ExecuteResponse{stdout("tick\n"), stderr("warn\n"),
				done(&sandboxv1.ExecResult{Status: sandboxv1.ExecStatus_EXEC_STATUS_TIMEOUT, StateLost: true, Timeout: durationpb.New(5 * time.Second)})},
			wantText: "```toon\nstatus: timeout\nsummary: \"Timeout: execution exceeded 5s\"\nstdout[1]: tick\nstderr[1]: warn\n" +
				"error: \"Execution exceeded the 5s timeout. " + lost + "\"\ntimeoutSeconds: 5\n```",
			wantStructured: `{"status":"timeout","summary":"Timeout: execution exceeded 5s","stdout":["tick"],"stderr":["warn"],` +
				`"error":"Execution exceeded the 5s timeout. ` + lost + `","timeoutSeconds":5}`,
			wantIsError: true,
		},
		{
			name:           "killed",
			events:         []*sandboxv1.ExecuteResponse{done(&sandboxv1.ExecResult{Status: sandboxv1.ExecStatus_EXEC_STATUS_KILLED, StateLost: true, Error: "out of memory"})},
			wantText:       "status: error\nSandbox stopped: out of memory\nerror: out of memory. " + lost,
			wantStructured: `{"status":"error","summary":"Sandbox stopped: out of memory","error":"out of memory. ` + lost + `"}`,
			wantIsError:    true,
		},
		{
			name:  "truncation marker",
			limit: 1000,
			events: []*sandboxv1.ExecuteResponse{stdout("head\n"),
				done(&sandboxv1.ExecResult{Status: sandboxv1.ExecStatus_EXEC_STATUS_OK, StdoutDroppedBytes: 1234567})},
			wantText: "head\n[output truncated: 1,234,567 bytes dropped — the cap is 1,000 bytes; write large data to a file in /workspace or return a summary]",
			wantStructured: `{"stdout":["head","[output truncated: 1,234,567 bytes dropped — the cap is 1,000 bytes; ` +
				`write large data to a file in /workspace or return a summary]"]}`,
		},
		{
			// sandboxd failed to cut: the gateway keeps twice the cap and
			// counts the rest as dropped.
			name:  "gateway backstop cap",
			limit: 4,
			events: []*sandboxv1.ExecuteResponse{stdout("abcdef"), stdout("ghij\n"),
				done(&sandboxv1.ExecResult{Status: sandboxv1.ExecStatus_EXEC_STATUS_OK, StdoutDroppedBytes: 10})},
			wantText: "abcdefgh\n[output truncated: 13 bytes dropped — the cap is 4 bytes; write large data to a file in /workspace or return a summary]",
			wantStructured: `{"stdout":["abcdefgh","[output truncated: 13 bytes dropped — the cap is 4 bytes; ` +
				`write large data to a file in /workspace or return a summary]"]}`,
		},
		{
			name:           "servers reported",
			events:         []*sandboxv1.ExecuteResponse{stdout("ok\n"), done(&sandboxv1.ExecResult{Status: sandboxv1.ExecStatus_EXEC_STATUS_OK, Servers: []string{"github"}})},
			wantText:       "ok",
			wantStructured: `{"stdout":["ok"],"servers":["github"]}`,
		},
		{
			name:           "unknown server from sandboxd",
			rpcErr:         status.Error(codes.InvalidArgument, `unknown MCP server "nope"; configured: github`),
			wantText:       `status: error` + "\n" + `Sandbox error: unknown MCP server "nope"; configured: github` + "\n" + `error: unknown MCP server "nope"; configured: github`,
			wantStructured: `{"status":"error","summary":"Sandbox error: unknown MCP server \"nope\"; configured: github","error":"unknown MCP server \"nope\"; configured: github"}`,
			wantIsError:    true,
		},
		{
			name:        "sandboxd unreachable mid-stream keeps partial output",
			events:      []*sandboxv1.ExecuteResponse{stdout("partial\n")},
			rpcErr:      status.Error(codes.Unavailable, "connection reset"),
			wantText:    "status: error\npartial\nerror: the sandbox service is unreachable (connection reset); retry shortly, and if it persists check that sandboxd is running",
			wantIsError: true,
			wantStructured: `{"status":"error","summary":"Sandbox error: the sandbox service is unreachable (connection reset); retry shortly, and if it persists check that sandboxd is running",` +
				`"stdout":["partial"],"error":"the sandbox service is unreachable (connection reset); retry shortly, and if it persists check that sandboxd is running"}`,
		},
		{
			name:           "stream ends without result",
			events:         []*sandboxv1.ExecuteResponse{stdout("x\n")},
			wantText:       "status: error\nx\nerror: the sandbox service ended the call without a result",
			wantStructured: `{"status":"error","summary":"Sandbox error: the sandbox service ended the call without a result","stdout":["x"],"error":"the sandbox service ended the call without a result"}`,
			wantIsError:    true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, f := newTestGateway(t, Config{OutputMode: tt.mode, OutputLimitBytes: tt.limit})
			f.setRespond(script(tt.events, tt.rpcErr))
			res := call(t, connect(t, g), ToolName, map[string]any{"code": "..."})
			if got := textOf(t, res); got != tt.wantText {
				t.Errorf("text =\n%q\nwant\n%q", got, tt.wantText)
			}
			if diff := cmp.Diff(jsonMap(t, tt.wantStructured), structured(t, res)); diff != "" {
				t.Errorf("structuredContent (-want +got):\n%s", diff)
			}
			if res.IsError != tt.wantIsError {
				t.Errorf("isError = %v, want %v", res.IsError, tt.wantIsError)
			}
		})
	}
}
