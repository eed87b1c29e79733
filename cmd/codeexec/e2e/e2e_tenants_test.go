package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// End-to-end tests of tenants over authenticated HTTP: what one tenant does
// stays out of another's sandboxes, quotas and upstream servers.

func TestE2ETenantsStayApart(t *testing.T) {
	t.Parallel()
	base := harness.StartAuthHTTP(t, map[string]string{"CODEEXEC_TOKENS_FILE": harness.TokensFile(t, map[string]string{"alpha-token": "alpha", "beta-token": "beta"})})
	a, b := tokenClient(t, base, "alpha-token"), tokenClient(t, base, "beta-token")
	harness.Code(t, a, `
save_memory("plan", "alpha's plan")
def shout(s):
    """Alpha's tool."""
    return s.upper()
save_tool(shout)
secret = 7`)
	o := harness.Code(t, b, `
import user_tools
print(load_memory("plan", default="none"), hasattr(user_tools, "shout"), "secret" in globals())`)
	if got := harness.Joined(o.Stdout()); got != "none False False" {
		t.Errorf("tenant beta sees %q; want none of alpha's memory, tools or variables", got)
	}
	harness.Code(t, b, `save_memory("plan", "beta's plan")`)
	// A second client of alpha shares alpha's memory and tools.
	a2 := tokenClient(t, base, "alpha-token")
	if got := harness.Joined(harness.Code(t, a2, "import user_tools\nprint(load_memory('plan'), user_tools.shout('hi'))").Stdout()); got != "alpha's plan HI" {
		t.Errorf("alpha's second session sees %q", got)
	}
	// Beta presenting alpha's MCP session ID is told it does not exist.
	resp, body := rawInitialize(t, base, map[string]string{"Authorization": "Bearer beta-token", "Mcp-Session-Id": a.GetSessionId()})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("beta with alpha's session ID: status %d, want 404: %s", resp.StatusCode, body)
	}
	if got := harness.Joined(harness.Code(t, a, "print(secret)").Stdout()); got != "7" {
		t.Errorf("alpha's session lost its state: %q", got)
	}
}

func TestE2EQuotaHitThenRecovers(t *testing.T) {
	t.Parallel()
	base := harness.StartAuthHTTP(t, map[string]string{"CODEEXEC_TOKENS_FILE": harness.TokensFile(t, map[string]string{"alpha-token": "alpha", "beta-token": "beta"})},
		"--quota-execs", "1")
	long, other, beta := tokenClient(t, base, "alpha-token"), tokenClient(t, base, "alpha-token"), tokenClient(t, base, "beta-token")
	harness.Code(t, other, "pass") // start the second session's sandbox first
	// The long call runs a sleep whose argument marks it, so the test
	// knows when the call holds the tenant's only execution slot.
	marker := fmt.Sprintf("3.%06d", time.Now().UnixNano()%1000000)
	var wg sync.WaitGroup
	wg.Go(func() {
		// The warm-up call's slot may be released a moment after its
		// result arrives; until then this call is refused too.
		for {
			o := harness.RunPython(t, long, map[string]any{"code": fmt.Sprintf("import subprocess\nsubprocess.run(['sleep', '%s'])\nprint('done')", marker)})
			if o.IsError && strings.Contains(o.Text, "concurrent executions") {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if o.IsError {
				t.Errorf("the long call failed: %s", o.Text)
			}
			return
		}
	})
	for deadline := time.Now().Add(60 * time.Second); len(processesWithArg(marker)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the long call never started")
		}
	}
	refused := harness.RunPython(t, other, map[string]any{"code": "pass"})
	if !refused.IsError || !strings.Contains(refused.Text, "limit of 1 concurrent executions") || !strings.Contains(refused.Text, "retry when") {
		t.Fatalf("while alpha's long call ran, another alpha call gave %q; want the concurrent-executions quota and when to retry", refused.Text)
	}
	// Beta has its own quota.
	harness.Code(t, beta, "pass")
	wg.Wait()
	harness.Code(t, other, "print('recovered')")
}

// memoryUpstream writes an MCP_SERVERS_CONFIG with the npm memory server,
// whose process carries mark in its environment.
func memoryUpstream(t *testing.T, mark string) string {
	t.Helper()
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	cfg := map[string]any{"mcpServers": map[string]any{"memory": map[string]any{
		"command": node, "args": []any{npmEntry(t, "server-memory")},
		"env": map[string]any{"CODEEXEC_TEST_MARK": mark, "MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")},
	}}}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestE2ETenantScopedUpstream(t *testing.T) {
	t.Parallel()
	cfgPath := memoryUpstream(t, "e2e-scoped-"+strings.ReplaceAll(t.TempDir(), "/", "_"))
	raw, _ := os.ReadFile(cfgPath)
	var cfg map[string]map[string]map[string]any
	_ = json.Unmarshal(raw, &cfg)
	cfg["mcpServers"]["memory"]["tenants"] = []any{"alpha"}
	raw, _ = json.Marshal(cfg)
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	base := harness.StartAuthHTTP(t, map[string]string{
		"CODEEXEC_TOKENS_FILE": harness.TokensFile(t, map[string]string{"alpha-token": "alpha", "beta-token": "beta"}),
		"MCP_SERVERS_CONFIG":   cfgPath,
	})
	a, b := tokenClient(t, base, "alpha-token"), tokenClient(t, base, "beta-token")
	if o := harness.RunPython(t, a, map[string]any{"code": "print(await mcp_memory.read_graph())", "servers": []any{"memory"}}); o.IsError {
		t.Fatalf("alpha cannot use its server: %s", o.Text)
	}
	o := harness.RunPython(t, b, map[string]any{"code": "pass", "servers": []any{"memory"}})
	if !o.IsError || !strings.Contains(o.Text, `unknown MCP server "memory"`) {
		t.Errorf("beta asking for alpha's server got %q; want it unknown", o.Text)
	}
	o = harness.Code(t, b, "print(runtime.discovered_servers(), await runtime.search_tool_docs('read graph'))")
	if strings.Contains(harness.Joined(o.Stdout()), "memory") {
		t.Errorf("beta discovers alpha's server: %q", harness.Joined(o.Stdout()))
	}
}
