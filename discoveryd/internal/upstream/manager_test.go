package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/discoveryd/internal/config"
)

// python3 returns the interpreter that runs testdata/fakeserver.py.
func python3(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3" // not a version-manager shim that rewrites PATH
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("these tests need python3 on PATH to run testdata/fakeserver.py: %v", err)
	}
	return p
}

func fake(t *testing.T, name string, extraArgs ...string) config.Server {
	t.Helper()
	script, err := filepath.Abs("testdata/fakeserver.py")
	if err != nil {
		t.Fatal(err)
	}
	return config.Server{Name: name, Transport: config.TransportStdio, Command: python3(t), Args: append([]string{script}, extraArgs...), Env: map[string]string{"FAKE_CONFIGURED": "yes"}}
}

func newManager(t *testing.T, servers []config.Server, opts Options) *Manager {
	t.Helper()
	if opts.BaseEnv == nil {
		opts.BaseEnv = map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": t.TempDir()}
	}
	if opts.BackoffMin == 0 {
		opts.BackoffMin = 50 * time.Millisecond
	}
	m := New(servers, opts, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func text(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) == 0 {
		t.Fatalf("result has no content: %+v", r)
	}
	tc, ok := r.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("content[0] is %T, want text", r.Content[0])
	}
	return tc.Text
}

func TestCallErrors(t *testing.T) {
	t.Parallel()
	m := newManager(t, []config.Server{
		fake(t, "fake"),
		fake(t, "dies", "--die-on-start"),
		{Name: "missing", Transport: config.TransportStdio, Command: "no-such-mcp-server-binary", Args: []string{"--flag"}},
		{Name: "badcwd", Transport: config.TransportStdio, Command: python3(t), Cwd: "/nonexistent/dir"},
		{Name: "spaced", Transport: config.TransportStdio, Command: "npx -y @modelcontextprotocol/server-everything", Args: []string{"stdio"}},
		{Name: "spaced-bare", Transport: config.TransportStdio, Command: "no-such-mcp-server-binary  --port\t3"},
	}, Options{})
	tests := []struct {
		name, server, tool string
		args               map[string]any
		timeout            time.Duration
		wantErr            error
		wantMsg            []string
	}{
		{name: "unknown server names the configured ones", server: "nope", tool: "echo", wantErr: ErrUnknownServer,
			wantMsg: []string{`"nope"`, "configured servers: badcwd, dies, fake, missing, spaced, spaced-bare"}},
		{name: "unknown tool names similar ones", server: "fake", tool: "ecko", wantErr: ErrUnknownTool,
			wantMsg: []string{`"ecko"`, "did you mean: echo"}},
		{name: "unknown tool with nothing similar lists the tools", server: "fake", tool: "zzzzzzzzzz", wantErr: ErrUnknownTool,
			wantMsg: []string{"its tools are: echo, fail, sleep, crash, env, add_tool"}},
		{name: "command not found", server: "missing", tool: "x", wantErr: ErrStartFailed,
			wantMsg: []string{`"missing"`, "executable file not found", "command: no-such-mcp-server-binary --flag"}},
		{name: "a command line in command says to put the arguments in args", server: "spaced", tool: "x", wantErr: ErrStartFailed,
			wantMsg: []string{"no such file or directory", `put the program alone in "command" and its arguments in "args", e.g. "command": "npx", "args": ["-y","@modelcontextprotocol/server-everything","stdio"]`}},
		{name: "a command line without a path in command", server: "spaced-bare", tool: "x", wantErr: ErrStartFailed,
			wantMsg: []string{"executable file not found", `"command": "no-such-mcp-server-binary", "args": ["--port","3"]`}},
		{name: "cwd does not exist", server: "badcwd", tool: "x", wantErr: ErrStartFailed,
			wantMsg: []string{`working directory "/nonexistent/dir"`}},
		{name: "exits on start with stderr tail", server: "dies", tool: "x", wantErr: ErrStartFailed,
			wantMsg: []string{"exit status 2", "cannot open database /nonexistent/db", "fakeserver.py --die-on-start"}},
		{name: "timeout names the duration", server: "fake", tool: "sleep", args: map[string]any{"seconds": 5}, timeout: 400 * time.Millisecond,
			wantErr: ErrTimeout, wantMsg: []string{`"fake"`, `tools/call "sleep"`, "400ms"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 20 * time.Second
			} else if _, err := m.Tools(t.Context(), tc.server); err != nil {
				// The timeout under test is the tool call's: start the
				// server first, as its start may take longer.
				t.Fatal(err)
			}
			_, err := m.CallTool(t.Context(), tc.server, tc.tool, tc.args, timeout, nil)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("CallTool error = %v, want %v", err, tc.wantErr)
			}
			for _, w := range tc.wantMsg {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestCallAndIsError(t *testing.T) {
	t.Parallel()
	m := newManager(t, []config.Server{fake(t, "fake")}, Options{})
	res, err := m.CallTool(t.Context(), "fake", "echo", map[string]any{"text": "hi there"}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "hi there" || res.IsError {
		t.Errorf("echo = %q (isError %v), want %q", got, res.IsError, "hi there")
	}
	res, err = m.CallTool(t.Context(), "fake", "fail", nil, 0, nil)
	if err != nil {
		t.Fatalf("a tool error must be a result, not an error: %v", err)
	}
	if !res.IsError {
		t.Errorf("fail: isError = false, want true")
	}
	st, _ := m.Status("fake")
	if st.State != StateRunning || st.ToolCount != 6 {
		t.Errorf("status = %+v, want running with 6 tools", st)
	}
}

func TestMinimalEnvironment(t *testing.T) {
	t.Setenv("CODEEXEC_TEST_HOST_SECRET", "must-not-leak")
	m := newManager(t, []config.Server{fake(t, "fake")}, Options{})
	res, err := m.CallTool(t.Context(), "fake", "env", nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(text(t, res)), &env); err != nil {
		t.Fatal(err)
	}
	if env["FAKE_CONFIGURED"] != "yes" || env["PATH"] != "/usr/local/bin:/usr/bin:/bin" {
		t.Errorf("configured env and base env missing: %v", env)
	}
	if _, ok := env["CODEEXEC_TEST_HOST_SECRET"]; ok {
		t.Errorf("the host environment leaked into the server: %v", env)
	}
}

func TestCrashMidCallRestartsOnNextUse(t *testing.T) {
	t.Parallel()
	m := newManager(t, []config.Server{fake(t, "fake")}, Options{})
	first := serverPID(t, m, "fake")
	_, err := m.CallTool(t.Context(), "fake", "crash", map[string]any{"code": 3}, 10*time.Second, nil)
	if !errors.Is(err, ErrCrashed) {
		t.Fatalf("crash: error = %v, want ErrCrashed", err)
	}
	for _, w := range []string{"exit status 3", "crashing on purpose", `tools/call "crash"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if st, _ := m.Status("fake"); st.State != StateFailed || !strings.Contains(st.LastError, "exit status 3") {
		t.Errorf("status after crash = %+v, want failed with the exit status", st)
	}
	res, err := m.CallTool(t.Context(), "fake", "echo", map[string]any{"text": "back"}, 10*time.Second, nil)
	if err != nil {
		t.Fatalf("call after crash: %v", err)
	}
	if text(t, res) != "back" {
		t.Errorf("echo after restart = %q", text(t, res))
	}
	if second := serverPID(t, m, "fake"); second == first {
		t.Errorf("server was not restarted (pid %d)", first)
	}
	if st, _ := m.Status("fake"); st.State != StateRunning || st.LastError != "" {
		t.Errorf("status after restart = %+v, want running and clean", st)
	}
}

func TestConcurrentCallsOverlap(t *testing.T) {
	t.Parallel()
	m := newManager(t, []config.Server{fake(t, "fake")}, Options{})
	if _, err := m.Tools(t.Context(), "fake"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	errc := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := m.CallTool(t.Context(), "fake", "sleep", map[string]any{"seconds": 1}, 10*time.Second, nil)
			errc <- err
		}()
	}
	for range 4 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("4 parallel 1s calls took %s; they were serialised", d)
	}
}

func TestToolsListChanged(t *testing.T) {
	t.Parallel()
	changed := make(chan string, 10)
	m := newManager(t, []config.Server{fake(t, "fake")}, Options{OnToolsChanged: func(s string) { changed <- s }})
	if _, err := m.Tools(t.Context(), "fake"); err != nil {
		t.Fatal(err)
	}
	<-changed
	if _, err := m.CallTool(t.Context(), "fake", "add_tool", map[string]any{"name": "brand_new"}, 0, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		tools, err := m.Tools(t.Context(), "fake")
		if err != nil {
			t.Fatal(err)
		}
		if hasTool(tools, "brand_new") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tool list not refreshed after list_changed: %v", toolNames(tools))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := m.CallTool(t.Context(), "fake", "brand_new", nil, 0, nil); !errors.Is(err, ErrRejected) {
		t.Errorf("calling the new tool: error = %v, want the server's own rejection (it has no handler)", err)
	}
}

func TestCloseLeavesNoProcess(t *testing.T) {
	t.Parallel()
	m := newManager(t, []config.Server{fake(t, "a"), fake(t, "b")}, Options{})
	var pids []int
	for _, n := range []string{"a", "b"} {
		pids = append(pids, serverPID(t, m, n))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if groupAlive(pid) {
			t.Errorf("process group %d still has members after Close", pid)
		}
	}
	if _, err := m.CallTool(t.Context(), "a", "echo", nil, 0, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close: %v, want ErrClosed", err)
	}
}

// serverPID starts the server if needed and returns its process ID, which
// is also its process group ID.
func serverPID(t *testing.T, m *Manager, name string) int {
	t.Helper()
	if _, err := m.Tools(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	s, err := m.server(name)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn.cmd.Process.Pid
}

// groupAlive reports whether any process is in process group pgid.
func groupAlive(pgid int) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command (which may contain spaces) start after ")".
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

func TestSimilarNames(t *testing.T) {
	t.Parallel()
	names := []string{"read_file", "read_multiple_files", "write_file", "list_directory", "search_files"}
	tests := []struct {
		want string
		got  []string
	}{
		{"readfile", []string{"read_file"}},
		{"READ-File", []string{"read_file"}},
		{"files", []string{"search_files", "read_multiple_files"}}, // closest first
		{"list_dir", []string{"list_directory"}},
		{"zzz", nil},
	}
	for _, tc := range tests {
		got := similarNames(tc.want, names, 5)
		if strings.Join(got, ",") != strings.Join(tc.got, ",") {
			t.Errorf("similarNames(%q) = %v, want %v", tc.want, got, tc.got)
		}
	}
}

func TestDefaultEnv(t *testing.T) {
	t.Parallel()
	host := map[string]string{"PATH": "/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "AWS_SECRET_ACCESS_KEY": "x", "SHELL": "() { :; }", "SYSTEMROOT": `C:\Windows`}
	lookup := func(k string) (string, bool) { v, ok := host[k]; return v, ok }
	got := DefaultEnv("linux", lookup)
	want := map[string]string{"PATH": "/bin", "HOME": "/home/u", "LANG": "C.UTF-8"}
	if len(got) != len(want) {
		t.Errorf("DefaultEnv(linux) = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("DefaultEnv(linux)[%s] = %q, want %q", k, got[k], v)
		}
	}
	if w := DefaultEnv("windows", lookup); w["SYSTEMROOT"] != `C:\Windows` || w["HOME"] != "" {
		t.Errorf("DefaultEnv(windows) = %v", w)
	}
	if m := mergeEnv(want, map[string]string{"PATH": "/opt/bin", "X": "1"}); strings.Join(m, ";") != "HOME=/home/u;LANG=C.UTF-8;PATH=/opt/bin;X=1" {
		t.Errorf("mergeEnv = %v", m)
	}
}
