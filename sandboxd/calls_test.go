package sandboxd_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

func TestBrokerEnforcesTheAllowList(t *testing.T) {
	t.Parallel()
	c, fd := newService(t, nil)
	id := create(t, c, "")
	r, err := execute(t.Context(), c, &sandboxv1.ExecuteRequest{SessionId: id, Servers: []string{"demo"}, Code: `
res = await mcp_demo.echo(text="hello")
print(res["content"][0]["text"], LOADED_MCP_SERVERS, sorted(mcp_servers))`})
	if err != nil || r.result.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK {
		t.Fatalf("allowed call: %+v %s, %v", r.result, r.stderr, err)
	}
	if want := "hello ('demo',) ['demo']\n"; r.stdout != want {
		t.Fatalf("stdout = %q, want %q", r.stdout, want)
	}
	if got := r.result.GetServers(); len(got) != 1 || got[0] != "demo" {
		t.Fatalf("result servers = %v", got)
	}
	// The next call does not name the server: its proxy is gone (its name
	// says how to load it) and a direct call is refused by sandboxd,
	// naming what to do.
	r, err = execute(t.Context(), c, &sandboxv1.ExecuteRequest{SessionId: id, Code: `
print(type(mcp_demo).__name__ == "UnloadedServer")
try:
    await runtime.call_tool("demo", "echo", {"text": "x"})
except runtime.MCPError as e:
    print("refused:", type(e).__name__, e.code, e)`})
	if err != nil || r.result.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK {
		t.Fatalf("refused call: %+v %s, %v", r.result, r.stderr, err)
	}
	if !strings.Contains(r.stdout, "True\nrefused: PermissionDeniedError permission_denied Server 'demo' is not available") ||
		!strings.Contains(r.stdout, `pass servers=["demo"]`) {
		t.Fatalf("stdout = %q, want the proxy gone and a PermissionDeniedError naming servers=[\"demo\"]", r.stdout)
	}
	fd.mu.Lock()
	defer fd.mu.Unlock()
	if len(fd.calls) != 1 {
		t.Fatalf("discoveryd saw calls %v, want exactly the allowed one", fd.calls)
	}
}

// A call made after its exec finished is refused with its own code, even
// when it reaches sandboxd during a later exec that allows its server.
func TestLateCallIsRefused(t *testing.T) {
	t.Parallel()
	c, _ := newService(t, nil)
	id := create(t, c, "")
	r, err := execute(t.Context(), c, &sandboxv1.ExecuteRequest{SessionId: id, Servers: []string{"demo"}, Code: `
import threading, time
late = None
def call_later():
    global late
    time.sleep(0.2)  # the exec is over by then
    try:
        runtime.save_memory("k", 1)
    except runtime.MCPError as e:
        late = (type(e).__name__, e.code, str(e))
threading.Thread(target=call_later).start()`})
	if err != nil || r.result.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK {
		t.Fatalf("exec 1: %+v %s, %v", r.result, r.stderr, err)
	}
	time.Sleep(time.Second) // the call waits in the channel for the next exec
	r, err = execute(t.Context(), c, &sandboxv1.ExecuteRequest{SessionId: id, Servers: []string{"demo"}, Code: `
for _ in range(100):
    if late:
        break
    time.sleep(0.05)
print(late)`})
	if err != nil || r.result.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK {
		t.Fatalf("exec 2: %+v %s, %v", r.result, r.stderr, err)
	}
	if want := "('FailedPreconditionError', 'failed_precondition', 'this call was made after its run_python call had finished')\n"; r.stdout != want {
		t.Errorf("late call: stdout = %q, want %q", r.stdout, want)
	}
}

// TestCallFloodIsServedInTurns: code that writes call frames straight to
// the agent's channel, as many as it likes, gets at most 64 of them served
// at once; the rest wait their turn, and a call the agent makes after the
// flood is answered. sandboxd used to start a goroutine for every call
// frame, and a flood of them took gigabytes of its memory and starved the
// replica's lease renewal, which stopped every tenant's sandboxes.
//
// The code waits for the flood's replies before its own call, so that
// every flood call has reached discoveryd when the exec ends: the calls of
// an exec that has ended are cancelled, and without the wait a flood call
// whose goroutine ran 30 ms late (a sleep put in sandboxd to show it) was
// never made, and discoveryd counted 600 calls.
func TestCallFloodIsServedInTurns(t *testing.T) {
	t.Parallel()
	c, fd := newService(t, nil)
	fd.mu.Lock()
	fd.slow = 20 * time.Millisecond
	fd.mu.Unlock()
	id := create(t, c, "")
	r, err := execute(t.Context(), c, &sandboxv1.ExecuteRequest{SessionId: id, Servers: []string{"demo"}, Code: `
import asyncio, gc, json, os, codeexec_channel
ch = [o for o in gc.get_objects() if isinstance(o, codeexec_channel.Channel)][0]
loop, replies = asyncio.get_running_loop(), []
frames = bytearray()
for i in range(600):
    body = json.dumps({"t": "call", "id": 10**9 + i, "exec": ch.exec_id, "m": "call_tool",
                       "p": {"server": "demo", "tool": "echo", "arguments": {"text": "flood"}}}).encode()
    frames += len(body).to_bytes(4, "big") + body
    replies.append(loop.create_future())
    ch._waiters[10**9 + i] = (loop, replies[-1])
with ch._wlock:
    view = memoryview(frames)
    while view:
        view = view[os.write(ch._wfd, view):]
await asyncio.gather(*replies)
res = await mcp_demo.echo(text="after the flood")
print(res["content"][0]["text"])`, Timeout: durationpb.New(60 * time.Second)})
	if err != nil || r.result.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK {
		t.Fatalf("exec: %+v %s, %v", r.result, r.stderr, err)
	}
	if r.stdout != "after the flood\n" {
		t.Fatalf("stdout = %q, want the call after the flood answered", r.stdout)
	}
	fd.mu.Lock()
	defer fd.mu.Unlock()
	// More than one at once shows that the calls did overlap, so that the
	// bound, not their order, kept them to 64.
	if fd.mostInFlight > 64 || fd.mostInFlight < 2 {
		t.Errorf("at most %d tool calls were under way at once, want 2 to 64", fd.mostInFlight)
	}
	if len(fd.calls) != 601 {
		t.Errorf("discoveryd served %d calls, want the 600 of the flood and the agent's own", len(fd.calls))
	}
}

// TestForgedDoneCountsNoNegativeDrops: a done frame that the code forges
// (it can reach the agent's channel) with a negative count of dropped
// bytes is read as no drop; the result said 18,446,744,073,709,551,611
// bytes were dropped, -5 read as unsigned.
func TestForgedDoneCountsNoNegativeDrops(t *testing.T) {
	t.Parallel()
	c, _ := newService(t, nil)
	id := create(t, c, "")
	r, err := execute(t.Context(), c, &sandboxv1.ExecuteRequest{SessionId: id, Code: `
import gc, json, os, time, codeexec_channel
ch = [o for o in gc.get_objects() if isinstance(o, codeexec_channel.Channel)][0]
body = json.dumps({"t": "done", "id": ch.exec_id, "ok": True, "exit": 0, "error": "",
                   "dropped": {"stdout": -5, "stderr": 7, "other": 9}}).encode()
with ch._wlock:
    os.write(ch._wfd, len(body).to_bytes(4, "big") + body)
time.sleep(1)`})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.result.GetStdoutDroppedBytes(); got != 0 {
		t.Errorf("stdout dropped = %d, want 0 for the forged -5", got)
	}
	if got := r.result.GetStderrDroppedBytes(); got != 7 {
		t.Errorf("stderr dropped = %d, want the 7 the frame gave", got)
	}
}
