package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// The tests of issue 37: the sandbox tells the truth. Each drives the real
// binary with the official SDK v1 client (testdata/sdkv1client.mjs) and
// the reference MCP servers from npm.

// truthServers writes a config with the reference filesystem server (one
// allowed directory, empty) and server-everything, both over stdio.
func truthServers(t *testing.T) (config string) {
	t.Helper()
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	dir := t.TempDir()
	servers := map[string]any{
		"filesystem": map[string]any{"command": node, "args": []any{npmEntry(t, "server-filesystem"), dir}},
		"everything": map[string]any{"command": node, "args": []any{npmEntry(t, "server-everything"), "stdio"}},
	}
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		t.Fatal(err)
	}
	config = filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(config, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return config
}

// sdkV1Result is what testdata/sdkv1client.mjs prints.
type sdkV1Result struct {
	Results []map[string]any `json:"results"`
	Reads   []struct {
		Contents []map[string]any `json:"contents"`
	} `json:"reads"`
	Tools        []map[string]any `json:"tools"`
	Elicitations []map[string]any `json:"elicitations"`
	Error        string           `json:"error"`
}

// sdkV1 runs `codeexec serve` under the SDK v1 client with the given
// environment, makes calls (run_python arguments, in order) and returns
// what the client got.
func sdkV1(t *testing.T, env map[string]string, spec map[string]any) sdkV1Result {
	t.Helper()
	envMap := map[string]string{}
	for _, kv := range harness.BaseEnv(t, env) {
		k, v, _ := strings.Cut(kv, "=")
		envMap[k] = v
	}
	for k, v := range env {
		if v == "" { // an empty value removes the variable
			delete(envMap, k)
		}
	}
	spec["command"], spec["args"], spec["env"] = harness.Binary, []string{"serve"}, envMap
	return runSDKV1(t, spec)
}

// runSDKV1 runs testdata/sdkv1client.mjs with spec and returns what it
// printed.
func runSDKV1(t *testing.T, spec map[string]any) sdkV1Result {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	cmd := exec.CommandContext(t.Context(), node, filepath.Join(harness.Root, "cmd/codeexec/e2e/testdata/sdkv1client.mjs"), string(raw))
	var stderr harness.LockedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res sdkV1Result
	if jerr := json.Unmarshal(out, &res); jerr != nil || err != nil || res.Error != "" {
		t.Fatalf("sdkv1client.mjs: %v %v %s\nstdout: %s\nstderr:\n%s", err, jerr, res.Error, out, harness.TailOf(stderr.String(), 6000))
	}
	return res
}

// runCalls is a list of run_python calls for sdkV1.
func runCalls(args ...map[string]any) []map[string]any {
	calls := make([]map[string]any, len(args))
	for i, a := range args {
		calls[i] = map[string]any{"name": "run_python", "arguments": a}
	}
	return calls
}

// structuredOf is a result's structuredContent, with its stdout and
// stderr joined.
func structuredOf(t *testing.T, res map[string]any) (sc map[string]any, stdout, stderr string) {
	t.Helper()
	sc, _ = res["structuredContent"].(map[string]any)
	if sc == nil {
		t.Fatalf("no structuredContent in %v", res)
	}
	return sc, harness.Joined(harness.StrList(sc["stdout"])), harness.Joined(harness.StrList(sc["stderr"]))
}

// TestE2ETruthToolErrorsRaise: a tool call that fails upstream raises
// ToolError, which the code can catch; uncaught, the run fails; the
// opt-out returns the dict as upstream did.
func TestE2ETruthToolErrorsRaise(t *testing.T) {
	t.Parallel()
	config := truthServers(t)
	fs := []any{"filesystem"}
	r := sdkV1(t, map[string]string{"MCP_SERVERS_CONFIG": config}, map[string]any{"calls": runCalls(
		map[string]any{"code": "res = await mcp_filesystem.read_text_file(path='/not/allowed')\nprint('carried on with', res)", "servers": fs},
		map[string]any{"code": "try:\n    await mcp_filesystem.read_text_file(path='/not/allowed')\n" +
			"except runtime.ToolError as e:\n    print(type(e).__name__, e.server, e.tool, 'Access denied' in e.message)\n" +
			"try:\n    runtime.call_tool_sync('filesystem', 'read_text_file', {'path': '/not/allowed'})\n" +
			"except runtime.ToolError as e:\n    print('sync', e.tool)\n" +
			"res = await mcp_filesystem.read_text_file(path='/not/allowed', raise_on_error=False)\nprint('dict', res['isError'])", "servers": fs},
	)})
	sc, stdout, stderr := structuredOf(t, r.Results[0])
	if isErr, _ := r.Results[0]["isError"].(bool); !isErr || sc["status"] != "error" || strings.Contains(stdout, "carried on") ||
		!strings.Contains(stderr, "ToolError: tool 'read_text_file' of server 'filesystem' failed: Access denied") {
		t.Errorf("a failed tool call did not fail the run: %v", r.Results[0])
	}
	if _, stdout, _ := structuredOf(t, r.Results[1]); stdout != "ToolError filesystem read_text_file True\nsync read_text_file\ndict True" {
		t.Errorf("caught ToolError: stdout = %q; result %v", stdout, r.Results[1])
	}

	// The setting, for code written for upstream.
	r = sdkV1(t, map[string]string{"MCP_SERVERS_CONFIG": config, "MCP_BRIDGE_TOOL_ERRORS": "return"}, map[string]any{"calls": runCalls(
		map[string]any{"code": "res = await mcp_filesystem.read_text_file(path='/not/allowed')\nprint(res['isError'])", "servers": fs},
	)})
	if _, stdout, _ := structuredOf(t, r.Results[0]); stdout != "True" {
		t.Errorf("MCP_BRIDGE_TOOL_ERRORS=return: stdout = %q; result %v", stdout, r.Results[0])
	}
}

// TestE2ETruthArgumentsChecked: arguments are checked against the tool's
// schema before the call, naming the field and what is accepted.
func TestE2ETruthArgumentsChecked(t *testing.T) {
	t.Parallel()
	config := truthServers(t)
	r := sdkV1(t, map[string]string{"MCP_SERVERS_CONFIG": config}, map[string]any{"calls": runCalls(
		map[string]any{"code": "try:\n    await mcp_everything.echo(mesage='typo')\n" +
			"except runtime.InvalidArgumentError as e:\n    print(isinstance(e, runtime.ToolError), e)\n" +
			"try:\n    await mcp_everything.echo(message=5)\nexcept runtime.ToolError as e:\n    print(e)\n" +
			"print((await mcp_everything.echo(message='fine'))['content'][0]['text'])", "servers": []any{"everything"}},
	)})
	_, stdout, _ := structuredOf(t, r.Results[0])
	lines := strings.Split(stdout, "\n")
	if len(lines) != 3 ||
		!strings.HasPrefix(lines[0], "True invalid arguments for tool 'echo' of server 'everything': missing required argument 'message' (a string)") ||
		lines[1] != "invalid arguments for tool 'echo' of server 'everything': argument 'message' is a number, but must be a string" ||
		lines[2] != "Echo: fine" {
		t.Errorf("stdout = %q; result %v", stdout, r.Results[0])
	}
}

// TestE2ETruthUnloadedServersSayHowToLoad: a configured server not loaded
// in the call has a name that says how to load it, also in saved tools.
func TestE2ETruthUnloadedServersSayHowToLoad(t *testing.T) {
	t.Parallel()
	config := truthServers(t)
	want := "Server 'everything' is not available: no servers are loaded in this call; pass servers=[\"everything\"] to run_python"
	r := sdkV1(t, map[string]string{"MCP_SERVERS_CONFIG": config}, map[string]any{"calls": runCalls(
		map[string]any{"code": "await mcp_everything.echo(message='hi')"},
		map[string]any{"code": "async def shout(m):\n    return (await mcp_everything.echo(message=m))['content'][0]['text'].upper()\n" +
			"print(save_tool(shout))", "servers": []any{"everything"}},
		map[string]any{"code": "try:\n    await shout('x')\nexcept runtime.MCPError as e:\n    print(e)"},
		map[string]any{"code": "print(await shout('hey'))", "servers": []any{"everything"}},
	)})
	sc, _, stderr := structuredOf(t, r.Results[0])
	if sc["status"] != "error" || !strings.Contains(stderr, want) || strings.Contains(stderr, "NameError") {
		t.Errorf("unloaded server: %v", r.Results[0])
	}
	if _, stdout, _ := structuredOf(t, r.Results[2]); !strings.HasPrefix(stdout, want) {
		t.Errorf("saved tool using an unloaded server: stdout = %q; %v", stdout, r.Results[2])
	}
	if _, stdout, _ := structuredOf(t, r.Results[3]); stdout != "ECHO: HEY" {
		t.Errorf("saved tool with its server loaded: stdout = %q; %v", stdout, r.Results[3])
	}
}

// TestE2ETruthSavedToolsCarryWhatTheyNeed: save_tool carries imports,
// constants and helpers, so the tool runs in a new process and in
// another codeexec on the same state dir; what cannot be carried is
// refused at save time.
func TestE2ETruthSavedToolsCarryWhatTheyNeed(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	state := harness.StateEnv(home)
	save := "import re\nSEP = '-'\ndef squash(s):\n    return re.sub(r'[^a-z0-9]+', SEP, s.lower())\n" +
		"def slug(s):\n    return squash(s).strip(SEP)\nprint(save_tool(slug))\n" +
		"import threading\nlock = threading.Lock()\ndef locked():\n    with lock:\n        return 1\n" +
		"try:\n    save_tool(locked)\nexcept ValueError as e:\n    print(e)"
	// One codeexec saves and stays up while another, on the same state
	// dir, uses the tool; a third starts after both have exited.
	first, _ := harness.StartStdio(t, state)
	o := harness.Code(t, first, save)
	if got := harness.Joined(o.Stdout()); !strings.HasPrefix(got, "Tool 'slug' saved.") ||
		!strings.Contains(got, "save_tool(locked) refused: locked uses lock, a lock, which save_tool cannot carry") {
		t.Fatalf("save: stdout = %q", got)
	}
	use := "print(slug('Hello World!'))\nimport user_tools\nprint(user_tools.slug('A  b'))"
	r := sdkV1(t, state, map[string]any{"calls": runCalls(map[string]any{"code": use})})
	if _, stdout, _ := structuredOf(t, r.Results[0]); stdout != "hello-world\na-b" {
		t.Errorf("another codeexec on the state dir: stdout = %q; %v", stdout, r.Results[0])
	}
	_ = first.Close()
	r = sdkV1(t, state, map[string]any{"calls": runCalls(map[string]any{"code": use})})
	if _, stdout, _ := structuredOf(t, r.Results[0]); stdout != "hello-world\na-b" {
		t.Errorf("a new codeexec: stdout = %q; %v", stdout, r.Results[0])
	}
}

// TestE2ETruthNoNetworkSaysSo: a network attempt fails at once, saying
// the sandbox has no network and that MCP servers reach the outside.
func TestE2ETruthNoNetworkSaysSo(t *testing.T) {
	t.Parallel()
	r := sdkV1(t, nil, map[string]any{"calls": runCalls(map[string]any{"code": "import time, urllib.request\nt = time.monotonic()\n" +
		"try:\n    urllib.request.urlopen('http://example.com', timeout=60)\nexcept OSError as e:\n    print(e)\n" +
		"print(time.monotonic() - t < 30)"})})
	_, stdout, _ := structuredOf(t, r.Results[0])
	if !strings.Contains(stdout, "the sandbox has no network, so 'example.com' cannot be reached; MCP servers reach the outside") ||
		!strings.HasSuffix(stdout, "True") {
		t.Errorf("stdout = %q", stdout)
	}
}

// TestE2ETruthRunPythonArguments: run_python's arguments are checked.
func TestE2ETruthRunPythonArguments(t *testing.T) {
	t.Parallel()
	r := sdkV1(t, nil, map[string]any{"listTools": true, "calls": runCalls(
		map[string]any{"code": "print(1)", "timeout": 0},
		map[string]any{"code": "print(1)", "timeout": -5},
		map[string]any{"code": "print(1)", "timeout": 100000},
		map[string]any{"code": "print(1)", "timeout_seconds": 5},
		map[string]any{"code": "import time\nt = time.monotonic()\ntime.sleep(1.6)\nprint('slept')", "timeout": 2.5},
	)})
	for i, want := range []string{
		"'timeout' must be a number of seconds from 1 to 3600 (fractions accepted), not 0",
		"'timeout' must be a number of seconds from 1 to 3600 (fractions accepted), not -5",
		"'timeout' must be a number of seconds from 1 to 3600 (fractions accepted), not 100000",
		"run_python does not take \"timeout_seconds\"; it accepts: code, servers, timeout, session, cancel",
	} {
		sc, _, _ := structuredOf(t, r.Results[i])
		if sc["status"] != "validation_error" || sc["error"] != want {
			t.Errorf("call %d: %v, want validation_error %q", i, sc, want)
		}
	}
	if _, stdout, _ := structuredOf(t, r.Results[4]); stdout != "slept" {
		t.Errorf("timeout=2.5: %v", r.Results[4])
	}
	schema, _ := r.Tools[0]["inputSchema"].(map[string]any)
	timeout, _ := schema["properties"].(map[string]any)["timeout"].(map[string]any)
	if schema["additionalProperties"] != false || timeout["type"] != "number" {
		t.Errorf("schema = %v", schema)
	}
}

// TestE2ETruthHandleOutlivesACleanExit: under MCP 2026-07-28 over stdio,
// a session handle lives until its TTL, whatever the client process
// does: a clean exit ends nothing.
func TestE2ETruthHandleOutlivesACleanExit(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	for _, kv := range harness.BaseEnv(t, nil) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	spec := func(calls ...map[string]any) map[string]any {
		return map[string]any{"transport": "stdio", "command": harness.Binary, "args": []string{"serve"}, "env": env,
			"negotiation": map[string]any{"pin": "2026-07-28"}, "calls": calls}
	}
	r := harness.SDKClient(t, spec(map[string]any{"name": "run_python", "arguments": map[string]any{"code": "kept = 41"}}))
	sc, _ := r.Results[0]["structuredContent"].(map[string]any)
	handle, _ := sc["session"].(string)
	if r.ProtocolVersion != "2026-07-28" || handle == "" {
		t.Fatalf("no handle from a 2026-07-28 client: %+v", r)
	}
	// The first client exited cleanly (client.close()); a new process
	// continues the session by its handle.
	r = harness.SDKClient(t, spec(map[string]any{"name": "run_python", "arguments": map[string]any{"code": "print(kept + 1)", "session": handle}}))
	if got := harness.ResultStdout(t, r, 0); got != "42" {
		t.Errorf("after a clean exit, the handle's session printed %q; result %v", got, r.Results[0])
	}
}

// TestE2ETruthNoticesOncePerCause: a value the checkpoint cannot hold is
// named once, not again on later calls that add other such values.
func TestE2ETruthNoticesOncePerCause(t *testing.T) {
	t.Parallel()
	r := sdkV1(t, nil, map[string]any{"calls": runCalls(
		map[string]any{"code": "import threading\nlock = threading.Lock()"},
		map[string]any{"code": "a = 1"},
		map[string]any{"code": "import socket\nsock = socket.socket()"},
		map[string]any{"code": "b = 2"},
		map[string]any{"code": "c = 3"},
	)})
	var said []string
	for i, res := range r.Results {
		_, _, stderr := structuredOf(t, res)
		said = append(said, stderr)
		if n := strings.Count(stderr, "lock ("); (i == 1) != (n == 1) || n > 1 {
			t.Errorf("call %d names the lock %d times: %q", i, n, stderr)
		}
		if n := strings.Count(stderr, "sock ("); (i == 3) != (n == 1) || n > 1 {
			t.Errorf("call %d names the socket %d times: %q", i, n, stderr)
		}
	}
	if t.Failed() {
		t.Logf("stderr of each call: %q", said)
	}
}

// TestE2ETruthCaughtThreadLimitKeepsTheSession: code that reaches the
// process cap, catches the RuntimeError and lets its threads end is not
// killed or rolled back.
func TestE2ETruthCaughtThreadLimitKeepsTheSession(t *testing.T) {
	t.Parallel()
	r := sdkV1(t, map[string]string{"MCP_BRIDGE_PIDS": "32"}, map[string]any{"calls": runCalls(
		map[string]any{"code": "kept = 'before'"},
		map[string]any{"code": "import threading\nev = threading.Event()\nts = []\ntry:\n" +
			"    for _ in range(1000):\n        t = threading.Thread(target=ev.wait)\n        t.start()\n        ts.append(t)\n" +
			"except RuntimeError as e:\n    print('caught:', e)\nev.set()\nfor t in ts:\n    t.join()\nkept = 'after'\nprint('finished')"},
		map[string]any{"code": "print(kept)"},
	)})
	sc, stdout, stderr := structuredOf(t, r.Results[1])
	if !strings.HasPrefix(stdout, "caught: can't start new thread") || !strings.HasSuffix(stdout, "finished") {
		t.Fatalf("the code did not reach the cap and finish: %v", r.Results[1])
	}
	if sc["status"] == "error" || strings.Contains(stderr, "process limit") {
		t.Errorf("a run that caught the thread limit and finished was failed: %v", r.Results[1])
	}
	if _, stdout, stderr := structuredOf(t, r.Results[2]); stdout != "after" || strings.Contains(stderr, "restored") {
		t.Errorf("the session was not kept: %v", r.Results[2])
	}
}

// TestE2ETruthCLI: the CLI refuses a flag where a name goes, says its
// version from the build info, expands ${PWD} without a PWD variable, and
// logs update_memory's expected retries at debug only.
func TestE2ETruthCLI(t *testing.T) {
	t.Parallel()
	env := harness.BaseEnv(t, nil)
	status, stdout, stderr := runBinary(t, env, "token", "add", "--help")
	if status != 0 || !strings.HasPrefix(stdout, "usage:") || strings.Contains(stdout, "\nsha256:") || strings.Contains(stderr, "token for tenant") {
		t.Errorf("token add --help: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	status, stdout, stderr = runBinary(t, env, "token", "add", "--force")
	if status != 2 || stdout != "" || !strings.Contains(stderr, `"--force" is not a tenant name`) {
		t.Errorf("token add --force: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	// The harness's binary may be built without VCS stamping (GOFLAGS
	// -buildvcs=false); this one is stamped where the checkout allows it
	// (Go stamps a clone, not a git worktree), as a release build is. What
	// `go version -m` reads from it is what version must print.
	stamped := filepath.Join(t.TempDir(), "codeexec")
	build := exec.CommandContext(t.Context(), "go", "build", "-buildvcs=auto", "-o", stamped, "./cmd/codeexec")
	build.Dir, build.Env = harness.Root, append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	info, err := exec.CommandContext(t.Context(), "go", "version", "-m", stamped).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "codeexec (devel)"
	for _, line := range strings.Split(string(info), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "mod" && f[2] != "(devel)":
			want = "codeexec " + f[2]
		case len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision="):
			want += " " + strings.TrimPrefix(f[1], "vcs.revision=")
		case len(f) == 2 && f[0] == "build" && f[1] == "vcs.modified=true":
			want += " modified"
		}
	}
	versionOut, err := exec.CommandContext(t.Context(), stamped, "version").Output()
	if err != nil || strings.TrimSpace(string(versionOut)) != want {
		t.Errorf("version: %v, stdout %q; want %q (from go version -m)", err, versionOut, want)
	}
	t.Logf("version: %s", versionOut)

	// ${PWD} in a project's .mcp.json, started without PWD (as a client
	// that execs codeexec directly does).
	project := t.TempDir()
	if err := os.Mkdir(filepath.Join(project, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	mcpJSON, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"fs": map[string]any{"command": node, "args": []any{npmEntry(t, "server-filesystem"), "${PWD}/data"}}}})
	if err := os.WriteFile(filepath.Join(project, ".mcp.json"), mcpJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	r := sdkV1(t, map[string]string{"PWD": ""}, map[string]any{"cwd": project, "calls": runCalls(map[string]any{
		"code": "print((await mcp_fs.list_allowed_directories())['content'][0]['text'])", "servers": []any{"fs"}})})
	sc, out, _ := structuredOf(t, r.Results[0])
	if !strings.Contains(out, filepath.Join(project, "data")) {
		t.Errorf("${PWD} without PWD: %v", sc)
	}

	// update_memory's retries on a conflict are expected: debug only. Two
	// codeexecs on one state dir update one key at once.
	state := harness.StateEnv(t.TempDir())
	c1, logs1 := harness.StartStdio(t, state)
	c2, logs2 := harness.StartStdio(t, state)
	// Each waits for the other to be ready, so that their updates overlap.
	bump := "import time\nsave_memory('ready%d', 1)\nwhile not memory_exists('ready%d'):\n    time.sleep(0.01)\n" +
		"for _ in range(60):\n    update_memory('n', lambda v: (v or 0) + 1)\nprint('ok')"
	done := make(chan error, 2)
	for i, c := range []harness.MCPClient{c1, c2} {
		go func() {
			o, err := harness.CallRunPython(t.Context(), c, map[string]any{"code": fmt.Sprintf(bump, i, 1-i)})
			if err == nil && harness.Joined(o.Stdout()) != "ok" {
				err = fmt.Errorf("update_memory: %s", o.Text)
			}
			done <- err
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := harness.Joined(harness.Code(t, c1, "print(load_memory('n'))").Stdout()); got != "120" {
		t.Fatalf("two codeexecs' update_memory: %q, want 120", got)
	}
	logs := logs1.String() + logs2.String()
	aborted := regexp.MustCompile(`(?m)^.*grpc\.code=Aborted.*$`).FindAllString(logs, -1)
	if len(aborted) == 0 {
		t.Fatalf("no update_memory conflict was logged at all (debug level); the test shows nothing:\n%s", harness.TailOf(logs, 3000))
	}
	for _, line := range aborted {
		if !strings.Contains(line, "level=DEBUG") {
			t.Errorf("an expected retry is logged above debug: %s", line)
		}
	}
}
