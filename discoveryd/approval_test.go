package discoveryd_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/discoveryd"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
)

// memoryServer is the npm memory server, whose tools carry annotations:
// create_entities is not read-only, delete_entities destructive, and
// read_graph read-only.
func memoryServer(t *testing.T) map[string]any {
	mem := stdio(t, "server-memory")
	mem["env"] = map[string]any{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}
	return mem
}

// approvalOf lists the tools of server that need approval, with why.
func approvalOf(t *testing.T, e *env, server string) map[string]string {
	t.Helper()
	resp, err := e.client.ListTools(t.Context(), &discoveryv1.ListToolsRequest{Server: server})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tool := range resp.GetTools() {
		if a := tool.GetApproval(); a != "" {
			out[tool.GetName()] = a
		}
	}
	return out
}

// TestApproveDestructive: --approve destructive marks the tools not
// annotated read-only and those annotated destructive; their calls are
// refused with ApprovalRequired until approved, and read-only ones run.
func TestApproveDestructive(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]any{"memory": memoryServer(t)}, func(c *discoveryd.Config) { c.Approve = []string{"destructive"} })
	ctx := t.Context()
	marked := approvalOf(t, e, "memory")
	for tool, want := range map[string]string{
		"create_entities": "--approve destructive: readOnlyHint is false",
		"delete_entities": "--approve destructive: destructiveHint is true",
	} {
		if marked[tool] != want {
			t.Errorf("approval of %s = %q, want %q", tool, marked[tool], want)
		}
	}
	if a, ok := marked["read_graph"]; ok {
		t.Errorf("read_graph (readOnlyHint true) is marked: %q", a)
	}

	args := `{"entities":[{"name":"a","entityType":"t","observations":[]}]}`
	_, err := e.client.CallTool(ctx, &discoveryv1.CallToolRequest{Server: "memory", Tool: "create_entities", ArgumentsJson: args})
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition {
		t.Fatalf("unapproved call: %v, want FailedPrecondition", err)
	}
	var detail *discoveryv1.ApprovalRequired
	for _, d := range st.Details() {
		if a, ok := d.(*discoveryv1.ApprovalRequired); ok {
			detail = a
		}
	}
	if detail == nil || detail.GetServer() != "memory" || detail.GetTool() != "create_entities" || !strings.Contains(detail.GetReason(), "readOnlyHint is false") {
		t.Fatalf("detail = %v, want ApprovalRequired for memory.create_entities", detail)
	}
	graph := func() string {
		resp, err := e.client.CallTool(ctx, &discoveryv1.CallToolRequest{Server: "memory", Tool: "read_graph"})
		if err != nil {
			t.Fatalf("read_graph (read-only) was refused: %v", err)
		}
		return resp.GetResultJson()
	}
	if strings.Contains(graph(), `"entities":[{"name":"a"`) {
		t.Fatal("the refused call created the entity")
	}
	// The alias of the tool is refused too: the rule applies to the tool.
	if _, err := e.client.CallTool(ctx, &discoveryv1.CallToolRequest{Server: "memory", Tool: "CREATE_ENTITIES", ArgumentsJson: args}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("call by another spelling: %v, want FailedPrecondition", err)
	}
	if _, err := e.client.CallTool(ctx, &discoveryv1.CallToolRequest{Server: "memory", Tool: "create_entities", ArgumentsJson: args, Approved: true}); err != nil {
		t.Fatalf("approved call: %v", err)
	}
	if !strings.Contains(graph(), `"entities":[{"name":"a"`) {
		t.Fatalf("the approved call did not create the entity: %s", graph())
	}
}

// TestApproveRules: SERVER.TOOL globs and a config entry's "approve" key
// mark their tools; a broken "approve" keeps the entry out; a malformed
// --approve is refused at start.
func TestApproveRules(t *testing.T) {
	t.Parallel()
	withKey := memoryServer(t)
	withKey["approve"] = []any{"delete_*"}
	broken := memoryServer(t)
	broken["approve"] = 3
	e := start(t, map[string]any{"memory": memoryServer(t), "keyed": withKey, "broken": broken},
		func(c *discoveryd.Config) { c.Approve = []string{"memory.read_*", "*.open_nodes"} })
	if got := approvalOf(t, e, "memory"); len(got) != 2 || got["read_graph"] != "--approve memory.read_*" || got["open_nodes"] != "--approve *.open_nodes" {
		t.Errorf("memory's marked tools = %v, want read_graph and open_nodes by their flags", got)
	}
	got := approvalOf(t, e, "keyed")
	if len(got) != 4 || !strings.HasPrefix(got["delete_entities"], `"approve": "delete_*" in the entry of server "keyed"`) || got["open_nodes"] == "" {
		t.Errorf("keyed's marked tools = %v, want the three delete_* by its entry and open_nodes by the flag", got)
	}
	list, err := e.client.ListServers(t.Context(), &discoveryv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var reason string
	for _, u := range list.GetUnloaded() {
		if u.GetName() == "broken" {
			reason = u.GetReason()
		}
	}
	if !strings.Contains(reason, `"approve" is a number`) || !strings.Contains(reason, "accepted: true") {
		t.Errorf("broken entry's reason = %q, want one naming \"approve\" and what it accepts", reason)
	}

	for _, bad := range []string{"memory", "memory.", ".x", "memory.[a"} {
		_, err := discoveryd.New(discoveryd.Config{Approve: []string{bad}}, nil)
		if err == nil || !strings.Contains(err.Error(), "--approve") {
			t.Errorf("--approve %q: %v, want an error naming the flag", bad, err)
		}
	}
}

// TestApproveWarnsOfUnmatchedRules: at start, a rule that matches no
// configured server, and one that matches none of its server's tools, are
// logged.
func TestApproveWarnsOfUnmatchedRules(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
	home := t.TempDir()
	writeJSON(t, filepath.Join(home, "MCPs", "servers.json"), map[string]any{"mcpServers": map[string]any{"memory": memoryServer(t)}})
	svc, err := discoveryd.New(discoveryd.Config{Home: home, Cwd: t.TempDir(), Getenv: os.Getenv,
		Approve: []string{"gitlab.*", "memory.no_such_*", "memory.delete_*"}}, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Close() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		out := buf.String()
		mu.Unlock()
		if strings.Contains(out, "memory.no_such_*") {
			if !strings.Contains(out, `rule="--approve gitlab.*"`) || !strings.Contains(out, "matches no configured server") {
				t.Errorf("no warning of gitlab.*: %s", out)
			}
			if strings.Contains(out, "memory.delete_*") {
				t.Errorf("memory.delete_*, which matches, was warned of: %s", out)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no warning of memory.no_such_* after listing the server: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestToolCallsPerMinute: past the cap, a tenant's calls of one tool are
// refused with RESOURCE_EXHAUSTED and when to retry, while its other tools
// and other tenants go on.
func TestToolCallsPerMinute(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]any{"memory": memoryServer(t)}, func(c *discoveryd.Config) { c.ToolCallsPerMinute = 2 })
	call := func(tool, tenant string) error {
		_, err := e.client.CallTool(t.Context(), &discoveryv1.CallToolRequest{Server: "memory", Tool: tool, Tenant: tenant})
		return err
	}
	for i := range 2 {
		if err := call("read_graph", "a"); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	err := call("read_graph", "a")
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "limit of 2 calls per minute to tool \"read_graph\"") || !strings.Contains(err.Error(), "retry in") {
		t.Fatalf("third call: %v, want ResourceExhausted naming the limit", err)
	}
	if err := call("search_nodes", "a"); status.Code(err) == codes.ResourceExhausted {
		t.Errorf("another tool was limited too: %v", err)
	}
	if err := call("read_graph", "b"); err != nil {
		t.Errorf("another tenant was limited too: %v", err)
	}
}
