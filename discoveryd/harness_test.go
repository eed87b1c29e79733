package discoveryd_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/discoveryd"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	"github.com/codeexec/codeexec/services/grpctest"
	"github.com/codeexec/codeexec/services/testenv"
)

// env is one discoveryd reached through the generated client over bufconn.
type env struct {
	svc    *discoveryd.Service
	client discoveryv1.DiscoveryServiceClient
	home   string
	mark   string // CODEEXEC_TEST_MARK value given to every stdio server
	closed bool
}

// start writes servers as ~/MCPs/servers.json in a temp home, and runs
// discoveryd over it. Every stdio server gets CODEEXEC_TEST_MARK in its env
// so that leftover processes can be found afterwards.
func start(t testing.TB, servers map[string]any, mutate func(*discoveryd.Config)) *env {
	t.Helper()
	home := t.TempDir()
	// The home's full path is unique per test; its base name ("001") is
	// not, and parallel tests must not see each other's processes.
	mark := "mark-" + strconv.Itoa(os.Getpid()) + strings.ReplaceAll(home, "/", "_")
	for _, v := range servers {
		entry, ok := v.(map[string]any)
		if !ok || entry["command"] == nil {
			continue
		}
		envm, _ := entry["env"].(map[string]any)
		if envm == nil {
			envm = map[string]any{}
		}
		envm["CODEEXEC_TEST_MARK"] = mark
		entry["env"] = envm
	}
	writeJSON(t, filepath.Join(home, "MCPs", "servers.json"), map[string]any{"mcpServers": servers})
	// The search model is off unless a test turns it on (model_test.go):
	// the others check what the words find and say.
	cfg := discoveryd.Config{Home: home, Cwd: t.TempDir(), Getenv: os.Getenv, SearchModel: "off"}
	if mutate != nil {
		mutate(&cfg)
	}
	svc, err := discoveryd.New(cfg, nil)
	if err != nil {
		t.Fatalf("discoveryd.New: %v", err)
	}
	e := &env{svc: svc, home: home, mark: mark}
	// Registered before the server's own cleanup, so it runs after the
	// server has stopped.
	t.Cleanup(func() {
		if !e.closed {
			_ = svc.Close()
		}
	})
	e.client = discoveryv1.NewDiscoveryServiceClient(grpctest.Start(t, svc.Register))
	return e
}

func (e *env) close(t *testing.T) {
	t.Helper()
	e.closed = true
	if err := e.svc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// npmServer returns the entry script of an npm MCP server from the repo's
// node_modules. The tests need the real servers, so a missing install is a
// failure with the fix, never a skip.
func npmServer(t testing.TB, pkg string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run `npm ci` in the repo root (%s) to install the MCP servers that package.json pins", p, root)
	}
	return p
}

// node returns the node binary.
func node(t testing.TB) string {
	t.Helper()
	testenv.Node(t)
	p, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH; install Node.js 18+ and run `npm ci` in the repo root: %v", err)
	}
	return p
}

// python3 returns a python3 that is not a version-manager shim.
func python3(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to run the crashing test server: %v", err)
	}
	return p
}

// stdio returns a config entry for an npm server.
func stdio(t *testing.T, pkg string, args ...string) map[string]any {
	t.Helper()
	testenv.Node(t)
	a := []any{npmServer(t, pkg)}
	for _, s := range args {
		a = append(a, s)
	}
	return map[string]any{"command": node(t), "args": a}
}

// fakeServer is the hand-written JSON-RPC server that can crash on demand.
func fakeServer(t testing.TB) map[string]any {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("internal", "upstream", "testdata", "fakeserver.py"))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"command": python3(t), "args": []any{p}}
}

// marked lists the PIDs of live processes whose environment holds mark.
func marked(mark string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if strings.Contains(string(b), "CODEEXEC_TEST_MARK="+mark+"\x00") {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && strings.Contains(string(st), ") Z ") {
				continue // a zombie is gone already, only not yet reaped
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

// result decodes a CallToolResponse.
type result struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	IsError           bool           `json:"isError"`
}

func decode(t testing.TB, resp *discoveryv1.CallToolResponse) result {
	t.Helper()
	var r result
	if err := json.Unmarshal([]byte(resp.GetResultJson()), &r); err != nil {
		t.Fatalf("result_json %q: %v", resp.GetResultJson(), err)
	}
	return r
}

func (r result) text() string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}
