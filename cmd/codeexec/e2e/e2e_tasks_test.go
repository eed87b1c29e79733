package e2e

// End-to-end tests of the tasks extension (io.modelcontextprotocol/tasks,
// SEP-2663) with raw JSON-RPC over HTTP: the SDK v2 client has no runtime
// for the extension's methods.

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// taskClient posts 2026-07-28 requests that declare the tasks extension
// (or not).
type taskClient struct {
	t        *testing.T
	url      string
	declared bool
	id       int
}

// call posts method with params and returns the JSON-RPC response, read
// from a JSON body or the last event of a stream.
func (c *taskClient) call(method string, params map[string]any) map[string]any {
	c.t.Helper()
	c.id++
	caps := map[string]any{}
	if c.declared {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e-tasks", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	req, err := http.NewRequestWithContext(c.t.Context(), http.MethodPost, c.url, strings.NewReader(string(body)))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	} else if id, ok := params["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	text := strings.TrimSpace(string(raw))
	if i := strings.LastIndex(text, "data: "); i >= 0 && !strings.HasPrefix(text, "{") {
		text = strings.TrimSpace(strings.SplitN(text[i+len("data: "):], "\n", 2)[0])
	}
	var msg map[string]any
	if err := json.Unmarshal([]byte(text), &msg); err != nil {
		c.t.Fatalf("%s: %s: %s", method, resp.Status, raw)
	}
	return msg
}

func resultOf(msg map[string]any) map[string]any { r, _ := msg["result"].(map[string]any); return r }

func errorCode(msg map[string]any) float64 {
	e, _ := msg["error"].(map[string]any)
	code, _ := e["code"].(float64)
	return code
}

// A long call of a client that declares the extension is a task, which
// tasks/get follows to its result, through either of two processes on
// the state dir; a quick one is answered as it is; tasks/cancel stops
// one; a client that does not declare the extension gets its result in
// the call, and -32021 from the extension's methods.
func TestE2ETasksExtension(t *testing.T) {
	t.Parallel()
	state := harness.StateEnv(t.TempDir())
	base, other := harness.StartHTTP(t, state), harness.StartHTTP(t, state)
	c := &taskClient{t: t, url: base + "/mcp", declared: true}
	// The task lives in its session's sandboxd: another process on the
	// state dir answers for it as well.
	elsewhere := &taskClient{t: t, url: other + "/mcp", declared: true}

	quick := resultOf(c.call("tools/call", map[string]any{"name": "run_python", "arguments": map[string]any{"code": "print('hi')"}}))
	if quick["resultType"] != "complete" || quick["taskId"] != nil || quick["content"] == nil {
		t.Errorf("a quick call: %v; want its result, not a task", quick)
	}

	created := resultOf(c.call("tools/call", map[string]any{"name": "run_python",
		"arguments": map[string]any{"code": "import time\nfor i in range(3):\n    print('step', i, flush=True)\n    time.sleep(1.5)\nanswer = 42"}}))
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || id == "" || created["status"] != "working" || created["ttlMs"] == nil ||
		created["createdAt"] == nil || created["content"] != nil || created["result"] != nil {
		t.Fatalf("a long call: %v; want a flat CreateTaskResult", created)
	}
	var done map[string]any
	for i := range 60 {
		poller := c
		if i%2 == 1 {
			poller = elsewhere
		}
		got := resultOf(poller.call("tasks/get", map[string]any{"taskId": id}))
		if got["resultType"] != "complete" || got["taskId"] != id {
			t.Fatalf("tasks/get: %v", got)
		}
		if got["status"] != "working" {
			done = got
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	res, _ := done["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if done["status"] != "completed" || harness.Joined(harness.StrList(sc["stdout"])) != "step 0\nstep 1\nstep 2" {
		t.Fatalf("the task's end: %v", done)
	}
	again := resultOf(elsewhere.call("tasks/get", map[string]any{"taskId": id}))
	if again["status"] != "completed" {
		t.Errorf("tasks/get after the end, again: %v", again)
	}

	cancelled := resultOf(c.call("tools/call", map[string]any{"name": "run_python",
		"arguments": map[string]any{"code": "import time\ntime.sleep(60)", "session": created["taskId"].(string)[:32]}}))
	cid, _ := cancelled["taskId"].(string)
	ack := resultOf(elsewhere.call("tasks/cancel", map[string]any{"taskId": cid}))
	if ack["resultType"] != "complete" || len(ack) != 1 {
		t.Errorf("tasks/cancel: %v; want an empty ack", ack)
	}
	var st any
	for range 40 {
		if st = resultOf(c.call("tasks/get", map[string]any{"taskId": cid}))["status"]; st != "working" {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if st != "cancelled" {
		t.Errorf("the cancelled task: %v", st)
	}
	if ack := resultOf(c.call("tasks/cancel", map[string]any{"taskId": cid})); ack["resultType"] != "complete" {
		t.Errorf("tasks/cancel of an ended task: %v; want the same ack", ack)
	}
	if code := errorCode(c.call("tasks/get", map[string]any{"taskId": "nonexistent"})); code != -32602 {
		t.Errorf("tasks/get of an unknown task: code %v, want -32602", code)
	}

	plain := &taskClient{t: t, url: base + "/mcp"}
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		if code := errorCode(plain.call(m, map[string]any{"taskId": id, "inputResponses": map[string]any{}})); code != -32021 {
			t.Errorf("%s without the extension: code %v, want -32021", m, code)
		}
	}
	sync := resultOf(plain.call("tools/call", map[string]any{"name": "run_python", "arguments": map[string]any{"code": "import time\ntime.sleep(3)\nprint('ok')"}}))
	if sync["resultType"] != "complete" || sync["taskId"] != nil {
		t.Errorf("a long call without the extension: %v; want its result", sync)
	}
}

// Over stdio under 2026-07-28 the same: the task's methods are answered
// on the stream, and a marked result leaves as the task.
func TestE2ETasksExtensionOverStdio(t *testing.T) {
	t.Parallel()
	s := harness.StartRawStdio(t, harness.BaseEnv(t, nil))
	defer func() { _ = s.Stdin.Close(); _ = s.Cmd.Wait() }()
	id := 0
	call := func(method string, params map[string]any) map[string]any {
		t.Helper()
		id++
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e-tasks", "version": "1"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := s.Stdin.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
		for s.Lines.Scan() {
			var msg map[string]any
			if json.Unmarshal(s.Lines.Bytes(), &msg) == nil && msg["id"] == float64(id) {
				return msg
			}
		}
		t.Fatalf("%s: no answer; stderr:\n%s", method, harness.TailOf(s.Logs.String(), 3000))
		return nil
	}
	created := resultOf(call("tools/call", map[string]any{"name": "run_python", "arguments": map[string]any{"code": "import time\ntime.sleep(4)\nprint('late')"}}))
	tid, _ := created["taskId"].(string)
	if created["resultType"] != "task" || tid == "" || created["content"] != nil {
		t.Fatalf("a long call over stdio: %v; want a task", created)
	}
	var got map[string]any
	for range 40 {
		if got = resultOf(call("tasks/get", map[string]any{"taskId": tid})); got["status"] != "working" {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	res, _ := got["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if got["status"] != "completed" || harness.Joined(harness.StrList(sc["stdout"])) != "late" {
		t.Errorf("the task over stdio: %v", got)
	}
}
