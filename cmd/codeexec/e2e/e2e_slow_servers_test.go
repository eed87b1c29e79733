package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// slowServers writes an MCP_SERVERS_CONFIG of testdata/slowserver.py
// servers, each name with its extra arguments, and returns the config and
// the directory of their logs and cues.
func slowServers(t *testing.T, servers map[string][]string) (config, dir string) {
	t.Helper()
	python := lookTool(t, "python3", "install python3")
	script := filepath.Join(repoRoot(t), "cmd", "codeexec", "e2e", "testdata", "slowserver.py")
	dir = t.TempDir()
	cfg := map[string]any{}
	for name, extra := range servers {
		cfg[name] = map[string]any{"command": python, "args": append([]string{script, "--name", name, "--dir", dir}, extra...)}
	}
	raw, err := json.Marshal(map[string]any{"mcpServers": cfg})
	if err != nil {
		t.Fatal(err)
	}
	config = filepath.Join(dir, "servers.json")
	if err := os.WriteFile(config, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return config, dir
}

// serverLog is what a slowserver.py server has done so far.
func serverLog(t *testing.T, dir, name string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, name+".log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(raw)), " ", "_"))
}

// A server that failed to start twice in a row is backing off, and a use
// meanwhile fails at once with the error of its last start, which names
// the server and says why (its stderr), without starting it. Before, each
// use waited the backoff out and started the server again (the fifth
// run_python using a server that exits at once: 30 s).
func TestE2EServerInBackoffFailsAtOnce(t *testing.T) {
	t.Parallel()
	config, dir := slowServers(t, map[string][]string{"broken": {"--exit"}})
	c, _ := harness.StartStdio(t, map[string]string{"MCP_SERVERS_CONFIG": config})
	// Loading the server fails once; the first call starts it again at
	// once (as after a crash) and fails a second time in a row, so the
	// calls after it come during the backoff. A use after the backoff
	// starts the server again: the backoff doubles with every start, so
	// only calls much slower than it start it again each time.
	const calls = 6
	o := harness.RunPython(t, c, map[string]any{"servers": []any{"broken"}, "timeout": 60, "code": `for _ in range(6):
    try:
        await mcp_broken.ping_broken()
    except runtime.MCPError as e:
        print(str(e).replace("\n", " "))`})
	lines := o.Stdout()
	if o.IsError || len(lines) != calls {
		t.Fatalf("%d calls to a broken server: %q (%s)", calls, lines, o.Text)
	}
	for _, l := range lines {
		for _, w := range []string{`server "broken"`, "exit status 2", "broken: cannot open /nonexistent/config"} {
			if !strings.Contains(l, w) {
				t.Errorf("error %q lacks %q", l, w)
			}
		}
	}
	if starts := strings.Count(strings.Join(serverLog(t, dir, "broken"), " "), "started"); starts >= 1+calls {
		t.Errorf("the server was started %d times for %d uses: each use during the backoff started it", starts, 1+calls)
	}
}
