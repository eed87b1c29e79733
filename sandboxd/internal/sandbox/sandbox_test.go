package sandbox_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
)

// start runs the real agent in a sandbox of the Direct engine: no
// isolation, so these tests need only Python.
func start(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	dir, argv, env := enginetest.Agent(t)
	spec := engine.Spec{ID: "sb-" + strings.ReplaceAll(t.Name(), "/", "-"), AgentDir: dir, Argv: argv, Env: env}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sb, err := sandbox.Start(ctx, enginetest.NewDirect(t), spec, enginetest.Logger(t))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(sb.Kill)
	return sb
}

// caller answers tool.list (which the agent asks when an exec carries no
// saved tools) with none and memory.delete with deleted, and holds every
// other call until its context ends; it records what it was asked.
type caller struct {
	mu    sync.Mutex
	calls []string
}

func (c *caller) Call(ctx context.Context, tenant string, _ *sandbox.ExecEnv, method string, params json.RawMessage) (json.RawMessage, error) {
	c.mu.Lock()
	c.calls = append(c.calls, tenant+" "+method+" "+string(params))
	c.mu.Unlock()
	switch method {
	case "tool.list":
		return json.RawMessage(`[]`), nil
	case "memory.delete":
		return json.RawMessage(`{"deleted": true}`), nil
	}
	<-ctx.Done()
	return nil, channel.Errorf(channel.CodeDeadlineExceeded, "held by the test until the call's end")
}

func (c *caller) asked() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

// output collects an exec's output.
type output struct {
	mu             sync.Mutex
	stdout, stderr strings.Builder
}

func (o *output) write(stream, text string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if stream == "stderr" {
		o.stderr.WriteString(text)
	} else {
		o.stdout.WriteString(text)
	}
	return nil
}

// exec runs code in sb with a budget of 20 s, unless x says otherwise.
func exec(t *testing.T, sb *sandbox.Sandbox, code string, x sandbox.Exec) (*sandbox.Outcome, *output) {
	t.Helper()
	out := &output{}
	x.Code, x.Out = code, out.write
	if x.Env == nil {
		x.Env = &sandbox.ExecEnv{}
	}
	if x.Calls == nil {
		x.Calls = &caller{}
	}
	if x.Tools == nil {
		x.Tools = func(bool) []channel.SavedTool { return nil }
	}
	if x.Budget == 0 {
		x.Budget, x.Timeout = 20*time.Second, 20*time.Second
	}
	return sb.Exec(t.Context(), x), out
}

func TestExecStreamsOutputAndResult(t *testing.T) {
	t.Parallel()
	sb := start(t)
	for _, tc := range []struct {
		name, code     string
		status         sandbox.Status
		exit           int
		stdout, stderr string
		err            string
	}{
		{"ok", "import sys\nprint('out')\nprint('err', file=sys.stderr)", sandbox.StatusOK, 0, "out\n", "err\n", ""},
		{"an exception is data", "raise ValueError('boom')", sandbox.StatusError, 1, "", "", "ValueError: boom"},
		{"the session goes on", "print(1 + 1)", sandbox.StatusOK, 0, "2\n", "", ""},
	} {
		res, out := exec(t, sb, tc.code, sandbox.Exec{})
		if res.Status != tc.status || res.ExitCode != tc.exit || res.StateLost {
			t.Errorf("%s: status %v exit %d state lost %v, want %v %d false (error %q)", tc.name, res.Status, res.ExitCode, res.StateLost, tc.status, tc.exit, res.Error)
		}
		if out.stdout.String() != tc.stdout || !strings.Contains(out.stderr.String(), tc.stderr) {
			t.Errorf("%s: stdout %q stderr %q, want %q and %q", tc.name, out.stdout.String(), out.stderr.String(), tc.stdout, tc.stderr)
		}
		if !strings.Contains(res.Error, tc.err) {
			t.Errorf("%s: error %q, want it to contain %q", tc.name, res.Error, tc.err)
		}
	}
}

// An exec whose budget runs out stops its sandbox and says what took the
// rest of the call's timeout, and that the sandbox was paused when it was.
func TestExecTimeoutStopsTheSandbox(t *testing.T) {
	t.Parallel()
	sb := start(t)
	res, _ := exec(t, sb, "import time\ntime.sleep(60)", sandbox.Exec{
		Budget: 300 * time.Millisecond, Timeout: 2 * time.Second, TimeoutNote: "1.7s went to loading the call's servers",
		Paused: func() bool { return true },
	})
	if res.Status != sandbox.StatusTimeout || !res.StateLost {
		t.Fatalf("status %v state lost %v, want a timeout that lost the state", res.Status, res.StateLost)
	}
	waitDead(t, sb)
	for _, want := range []string{"exceeded the 2s timeout (1.7s went to loading", "it had been paused since this sandbox replica lost the session store"} {
		if !strings.Contains(res.Error, want) {
			t.Errorf("error %q, want it to say %q", res.Error, want)
		}
	}
}

// A sandbox that dies in an exec ends it as killed, saying how; one whose
// request ends is stopped, so that the code does not run on unobserved.
func TestExecEndsWithItsSandboxOrItsRequest(t *testing.T) {
	t.Parallel()
	died := start(t)
	res, _ := exec(t, died, "import os\nos._exit(3)", sandbox.Exec{})
	if res.Status != sandbox.StatusKilled || !res.StateLost || !strings.Contains(res.Error, "the sandbox died") {
		t.Errorf("a sandbox that exited: status %v, error %q, want killed saying it died", res.Status, res.Error)
	}

	left := start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	out := sandbox.Exec{Code: "import time\ntime.sleep(60)", Env: &sandbox.ExecEnv{}, Calls: &caller{}, Budget: time.Minute, Timeout: time.Minute,
		Tools: func(bool) []channel.SavedTool { return nil }}
	if res := left.Exec(ctx, out); res.Status != sandbox.StatusKilled || !strings.Contains(res.Error, "cancelled by the client") {
		t.Errorf("an exec whose request ended: status %v, error %q", res.Status, res.Error)
	}
	waitDead(t, left)
}

// waitDead waits for sb's channel to end, as it does soon after its
// process is reaped.
func waitDead(t *testing.T, sb *sandbox.Sandbox) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); sb.Alive(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sandbox's channel is still up 10 s after it was stopped")
		}
	}
}

// The calls the code makes reach the Caller with the exec's tenant; a
// call still waiting when the budget runs out is ended with it.
func TestExecServesTheCodesCalls(t *testing.T) {
	t.Parallel()
	sb := start(t)
	c := &caller{}
	res, out := exec(t, sb, "print(delete_memory('k'))", sandbox.Exec{Tenant: "alice", Calls: c})
	if res.Status != sandbox.StatusOK || out.stdout.String() != "Memory 'k' deleted.\n" {
		t.Fatalf("status %v error %q stdout %q", res.Status, res.Error, out.stdout.String())
	}
	if got := c.asked(); len(got) != 2 || !strings.HasPrefix(got[1], `alice memory.delete {"key":"k"}`) {
		t.Errorf("calls %q, want the saved tools' list and alice's memory.delete of k", got)
	}
	res, _ = exec(t, sb, "load_memory('held')", sandbox.Exec{Calls: c, Budget: 500 * time.Millisecond, Timeout: time.Second})
	if res.Status != sandbox.StatusError && res.Status != sandbox.StatusTimeout {
		t.Errorf("a call held past the budget: status %v error %q, want it ended", res.Status, res.Error)
	}
}

// A session's first exec in a sandbox asks for the saved tools, and only
// that one; the pool's warm-up exec does not count.
func TestFirstExecCarriesTheSavedTools(t *testing.T) {
	t.Parallel()
	sb := start(t)
	if err := sb.WarmUp(t.Context()); err != nil {
		t.Fatalf("WarmUp: %v", err)
	}
	var firsts []bool
	tools := func(first bool) []channel.SavedTool {
		firsts = append(firsts, first)
		if first {
			return []channel.SavedTool{{Name: "twice", Source: "def twice(x):\n    return 2 * x\n"}}
		}
		return nil
	}
	_, out := exec(t, sb, "print(twice(21))", sandbox.Exec{Tools: tools})
	exec(t, sb, "pass", sandbox.Exec{Tools: tools})
	if out.stdout.String() != "42\n" || len(firsts) != 2 || !firsts[0] || firsts[1] {
		t.Errorf("stdout %q, first execs %v; want 42 from the saved tool, and [true false]", out.stdout.String(), firsts)
	}
	if !sb.SessionStarted() {
		t.Error("SessionStarted is false after a session's exec")
	}
}
