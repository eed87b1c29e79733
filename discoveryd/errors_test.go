package discoveryd_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/codeexec/codeexec/discoveryd"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
)

// errorServers is a set of servers that exercise every failure.
func errorServers(t *testing.T) map[string]any {
	return map[string]any{
		"fake":    fakeServer(t),
		"missing": map[string]any{"command": "no-such-mcp-server-binary", "args": []any{"--stdio"}},
		"dies":    map[string]any{"command": python3(t), "args": []any{fakeServer(t)["args"].([]any)[0], "--die-on-start"}},
	}
}

func wantStatus(t *testing.T, err error, code codes.Code, msg []string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("error = %v, want code %v", err, code)
	}
	for _, w := range msg {
		if !strings.Contains(status.Convert(err).Message(), w) {
			t.Errorf("message %q lacks %q", status.Convert(err).Message(), w)
		}
	}
}

func TestCallToolError(t *testing.T) {
	t.Parallel()
	e := start(t, errorServers(t), nil)
	tests := []struct {
		name string
		req  *discoveryv1.CallToolRequest
		code codes.Code
		msg  []string
	}{
		{"empty server", &discoveryv1.CallToolRequest{Tool: "echo"}, codes.InvalidArgument, []string{"server is empty"}},
		{"empty tool", &discoveryv1.CallToolRequest{Server: "fake"}, codes.InvalidArgument, []string{"tool is empty"}},
		{"arguments not JSON", &discoveryv1.CallToolRequest{Server: "fake", Tool: "echo", ArgumentsJson: "{nope"}, codes.InvalidArgument, []string{"not valid JSON"}},
		{"arguments not an object", &discoveryv1.CallToolRequest{Server: "fake", Tool: "echo", ArgumentsJson: "[1]"}, codes.InvalidArgument, []string{"must be a JSON object", "got an array"}},
		{"negative timeout", &discoveryv1.CallToolRequest{Server: "fake", Tool: "echo", Timeout: durationpb.New(-time.Second)}, codes.InvalidArgument, []string{"timeout"}},
		{"unknown server", &discoveryv1.CallToolRequest{Server: "nope", Tool: "echo"}, codes.NotFound, []string{`"nope"`, "configured servers: dies, fake, missing"}},
		{"unknown tool", &discoveryv1.CallToolRequest{Server: "fake", Tool: "echoo"}, codes.NotFound, []string{`"echoo"`, "did you mean: echo"}},
		{"command does not exist", &discoveryv1.CallToolRequest{Server: "missing", Tool: "x"}, codes.Unavailable, []string{"executable file not found", "command: no-such-mcp-server-binary --stdio"}},
		{"exits on start", &discoveryv1.CallToolRequest{Server: "dies", Tool: "x"}, codes.Unavailable, []string{"exit status 2", "cannot open database"}},
		{"timeout", &discoveryv1.CallToolRequest{Server: "fake", Tool: "sleep", ArgumentsJson: `{"seconds": 5}`, Timeout: durationpb.New(300 * time.Millisecond)}, codes.DeadlineExceeded, []string{`tools/call "sleep"`, "300ms"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.code == codes.DeadlineExceeded {
				// The timeout under test is the tool call's: start the
				// server first, as its start may take longer than 300ms.
				if _, err := e.client.ListTools(t.Context(), &discoveryv1.ListToolsRequest{Server: tc.req.GetServer()}); err != nil {
					t.Fatal(err)
				}
			}
			_, err := e.client.CallTool(t.Context(), tc.req)
			wantStatus(t, err, tc.code, tc.msg)
		})
	}
}

func TestListToolsError(t *testing.T) {
	t.Parallel()
	e := start(t, errorServers(t), nil)
	tests := []struct {
		name, server string
		code         codes.Code
		msg          []string
	}{
		{"empty", "", codes.InvalidArgument, []string{"server is empty"}},
		{"unknown", "github", codes.NotFound, []string{"configured servers"}},
		{"start fails", "missing", codes.Unavailable, []string{"no-such-mcp-server-binary"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := e.client.ListTools(t.Context(), &discoveryv1.ListToolsRequest{Server: tc.server})
			wantStatus(t, err, tc.code, tc.msg)
		})
	}
}

func TestGetToolDocsError(t *testing.T) {
	t.Parallel()
	e := start(t, errorServers(t), nil)
	tests := []struct {
		name string
		req  *discoveryv1.GetToolDocsRequest
		code codes.Code
		msg  []string
	}{
		{"empty server", &discoveryv1.GetToolDocsRequest{}, codes.InvalidArgument, []string{"server is empty"}},
		{"bad detail", &discoveryv1.GetToolDocsRequest{Server: "fake", Detail: 9}, codes.InvalidArgument, []string{"DETAIL_SUMMARY or DETAIL_FULL"}},
		{"unknown server", &discoveryv1.GetToolDocsRequest{Server: "nope"}, codes.NotFound, []string{"configured servers"}},
		{"unknown tool", &discoveryv1.GetToolDocsRequest{Server: "fake", Tool: "slep"}, codes.NotFound, []string{"did you mean: sleep"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := e.client.GetToolDocs(t.Context(), tc.req)
			wantStatus(t, err, tc.code, tc.msg)
		})
	}
}

func TestSearchToolsError(t *testing.T) {
	t.Parallel()
	e := start(t, errorServers(t), nil)
	tests := []struct {
		name string
		req  *discoveryv1.SearchToolsRequest
		code codes.Code
		msg  []string
	}{
		{"blank query", &discoveryv1.SearchToolsRequest{Query: "  "}, codes.InvalidArgument, []string{"query is empty"}},
		{"bad detail", &discoveryv1.SearchToolsRequest{Query: "x", Detail: 7}, codes.InvalidArgument, []string{"DETAIL_SUMMARY or DETAIL_FULL"}},
		{"unknown server in filter", &discoveryv1.SearchToolsRequest{Query: "x", Servers: []string{"fake", "nope"}}, codes.NotFound, []string{`"nope"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := e.client.SearchTools(t.Context(), tc.req)
			wantStatus(t, err, tc.code, tc.msg)
		})
	}
}

func TestListServers(t *testing.T) {
	t.Parallel()
	cwd := t.TempDir()
	e := start(t, map[string]any{
		"fake":     fakeServer(t),
		"9 Remote": map[string]any{"type": "sse", "url": "http://127.0.0.1:1/sse", "description": "an SSE server"},
		"off":      map[string]any{"command": "x", "disabled": true},
	}, func(c *discoveryd.Config) { c.Cwd = cwd })
	// A broken file is reported; the good one still loads.
	if err := os.WriteFile(filepath.Join(e.home, "MCPs", "broken.json"), []byte(`{"mcpServers": {`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := e.client.ListTools(ctx, &discoveryv1.ListToolsRequest{Server: "fake"}); err != nil {
		t.Fatal(err)
	}
	resp, err := e.client.ListServers(ctx, &discoveryv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetWarnings()) != 0 {
		t.Errorf("warnings before rescan = %q", resp.GetWarnings())
	}
	got := map[string]*discoveryv1.Server{}
	for _, s := range resp.GetServers() {
		got[s.GetName()] = s
	}
	if len(got) != 2 || got["off"] != nil {
		t.Fatalf("servers = %v, want fake and 9 Remote", resp.GetServers())
	}
	if s := got["9 Remote"]; s.GetAlias() != "_9_remote" || s.GetTransport() != discoveryv1.Transport_TRANSPORT_SSE ||
		s.GetStatus() != discoveryv1.ServerStatus_SERVER_STATUS_STOPPED || s.GetDescription() != "an SSE server" {
		t.Errorf("9 Remote = %v", s)
	}
	if s := got["fake"]; s.GetStatus() != discoveryv1.ServerStatus_SERVER_STATUS_RUNNING || s.GetToolCount() != 6 ||
		s.GetTransport() != discoveryv1.Transport_TRANSPORT_STDIO || !strings.HasSuffix(s.GetSource(), "servers.json") {
		t.Errorf("fake = %v", s)
	}

	// Rescan: a new file adds a server; the broken file, an entry whose
	// "disabled" cannot be read and an item of Claude Code's
	// disabledMcpServers that is not a name are reported, and the server
	// that list names is left out.
	writeJSON(t, filepath.Join(e.home, "MCPs", "more.json"), map[string]any{"mcpServers": map[string]any{"added-later": map[string]any{"command": "y"}, "fake": map[string]any{"command": "ignored"},
		"half-off": map[string]any{"command": "z", "disabled": "yes"}}})
	writeJSON(t, filepath.Join(e.home, ".claude.json"), map[string]any{"mcpServers": map[string]any{"claude-off": map[string]any{"command": "c"}},
		"projects": map[string]any{cwd: map[string]any{"disabledMcpServers": []any{"claude-off", 7}}}})
	resp, err = e.client.ListServers(ctx, &discoveryv1.ListServersRequest{Rescan: true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetServers() {
		names = append(names, s.GetName())
	}
	if strings.Join(names, ",") != "9 Remote,added-later,fake" {
		t.Errorf("servers after rescan = %v", names)
	}
	if w := resp.GetWarnings(); len(w) != 3 || !strings.Contains(w[0], "broken.json: invalid JSON at line 1, column 17") ||
		!strings.Contains(w[1], `more.json: server "half-off": "disabled" is the string "yes"; accepted: true or false`) ||
		!strings.Contains(w[2], `.claude.json: projects.`+strconv.Quote(cwd)+`.disabledMcpServers item 2 is a number (7), not a server name`) {
		t.Errorf("warnings after rescan = %q, want the broken file with its reason and position, the entry with the field, then the list's item", w)
	}
}
