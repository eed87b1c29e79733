package durable

// End-to-end tests of durable sessions and of MCP 2026-07-28, where a
// session is a handle: the official TypeScript SDK v2 client pinned to the
// stateless revision, over HTTP and stdio, and sessions that outlive the
// process, or the sandbox, that held them.

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// defineAll puts one of each kind of state in a session: a variable, a
// function, a class (with an instance) and an import.
const defineAll = `
import fractions
count = 41
def bump(n):
    return n + 1
class Box:
    def __init__(self, v):
        self.v = v
    def twice(self):
        return 2 * self.v
box = Box(21)
half = fractions.Fraction(1, 2)`

// checkAll reads every one of them back, and bumps count.
const checkAll = `
count = bump(count)
print(count, box.twice(), Box(5).twice(), half + fractions.Fraction(1, 2))`

// wantAll is what checkAll prints the first time.
const wantAll = "42 42 10 1"

// modern is a spec for testdata/sdkclient.mjs pinned to 2026-07-28 over
// HTTP at base.
func modern(base string, calls ...map[string]any) map[string]any {
	return map[string]any{"transport": "http", "url": base + "/mcp", "negotiation": map[string]any{"pin": "2026-07-28"}, "calls": calls}
}

// pyCall is one run_python call; session "" starts a session.
func pyCall(code, session string) map[string]any {
	args := map[string]any{"code": code}
	if session != "" {
		args["session"] = session
	}
	return map[string]any{"name": "run_python", "arguments": args}
}

// sessionOf returns the handle the i-th result carries.
func sessionOf(t *testing.T, r harness.SDKResult, i int) string {
	t.Helper()
	sc, _ := r.Results[i]["structuredContent"].(map[string]any)
	h, _ := sc["session"].(string)
	if len(h) < 32 {
		t.Fatalf("result %d carries no session handle: %v", i, r.Results[i])
	}
	return h
}

// The SDK v2 client pinned to 2026-07-28 over HTTP: no initialize and no
// MCP session; the first call starts a session and says its handle once,
// later calls pass it back and keep the state. A session-based client on
// the same endpoint at the same time is served as before, with no handle.
func TestE2ESDKv2PinnedToStatelessOverHTTP(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, harness.StateEnv(t.TempDir()))
	out := harness.SDKClient(t, modern(base, pyCall(defineAll, ""), pyCall(checkAll, "$session"), pyCall("print(count)", "$session"), pyCall("print('count' in globals())", "")))
	if out.ProtocolVersion != "2026-07-28" {
		t.Fatalf("negotiated %q, want 2026-07-28", out.ProtocolVersion)
	}
	h := sessionOf(t, out, 0)
	if text := harness.ResultText(out.Results[0]); !strings.Contains(text, h) {
		t.Errorf("a new session's result does not name its handle in the text: %q", text)
	}
	if got := harness.ResultStdout(t, out, 1); got != wantAll {
		t.Errorf("with the handle: %q, want %q", got, wantAll)
	}
	if text := harness.ResultText(out.Results[1]); strings.Contains(text, "session:") {
		t.Errorf("a continued session's text repeats the handle: %q", text)
	}
	if got := harness.ResultStdout(t, out, 2); got != "42" || sessionOf(t, out, 2) != h {
		t.Errorf("third call: %q in session %s, want 42 in %s", got, sessionOf(t, out, 2), h)
	}
	if got := harness.ResultStdout(t, out, 3); got != "False" || sessionOf(t, out, 3) == h {
		t.Errorf("a call without a handle: %q in session %s, want a new, empty session", got, sessionOf(t, out, 3))
	}

	legacy := harness.HTTPClient(t, base)
	o := harness.Code(t, legacy, "who = 'legacy'")
	if _, ok := o.Structured["session"]; ok {
		t.Errorf("a session-based client's result carries a handle: %v", o.Structured)
	}
	if got := harness.Joined(harness.Code(t, legacy, "print(who, 'count' in globals())").Stdout()); got != "legacy False" {
		t.Errorf("the session-based client: %q", got)
	}
	// A session-based client may resume a handle's session too.
	o = harness.RunPython(t, legacy, map[string]any{"code": "print(count)", "session": h})
	if got := harness.Joined(o.Stdout()); got != "42" {
		t.Errorf("a session-based client resuming the handle: %q (%s)", got, o.Text)
	}
}

// Over stdio the pinned client keeps its state too: the process is the
// session, with or without the handle.
func TestE2ESDKv2PinnedToStatelessOverStdio(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	out := harness.SDKClient(t, map[string]any{
		"transport": "stdio", "command": harness.Binary, "args": []string{"serve"}, "env": envMap(harness.BaseEnv(t, harness.StateEnv(home))),
		"negotiation": map[string]any{"pin": "2026-07-28"},
		"calls":       []map[string]any{pyCall(defineAll, ""), pyCall(checkAll, ""), pyCall("print(count)", "$session")},
	})
	if out.ProtocolVersion != "2026-07-28" {
		t.Fatalf("negotiated %q, want 2026-07-28", out.ProtocolVersion)
	}
	if got := harness.ResultStdout(t, out, 1); got != wantAll {
		t.Errorf("second call over stdio: %q, want %q", got, wantAll)
	}
	if got := harness.ResultStdout(t, out, 2); got != "42" {
		t.Errorf("third call with the handle: %q, want 42", got)
	}
}

// A session outlives the process that served it: `serve --http` is
// stopped and started again on the same state dir, and the handle brings
// the variable, function, class and import back, saying once what was
// restored.
func TestE2ESessionSurvivesARestart(t *testing.T) {
	t.Parallel()
	env := harness.BaseEnv(t, harness.StateEnv(t.TempDir()))
	addr := harness.FreeAddr(t)
	first, _ := harness.StartCommand(t, env, "serve", "--http", addr)
	harness.WaitHTTP(t, "http://"+addr+"/healthz")
	h := sessionOf(t, harness.SDKClient(t, modern("http://"+addr, pyCall(defineAll, ""))), 0)
	stop(t, first, syscall.SIGTERM)

	addr = harness.FreeAddr(t)
	harness.StartProcess(t, env, "serve", "--http", addr)
	harness.WaitHTTP(t, "http://"+addr+"/healthz")
	out := harness.SDKClient(t, modern("http://"+addr, pyCall(checkAll, h), pyCall(checkAll, h)))
	if got := harness.ResultStdout(t, out, 0); got != wantAll {
		t.Fatalf("after the restart: %q, want %q (%s)", got, wantAll, harness.ResultText(out.Results[0]))
	}
	text := harness.ResultText(out.Results[0])
	for _, name := range []string{"restored", "count", "bump", "Box", "box", "fractions"} {
		if !strings.Contains(text, name) {
			t.Errorf("the first result after the restart does not mention %q: %q", name, text)
		}
	}
	if got, text := harness.ResultStdout(t, out, 1), harness.ResultText(out.Results[1]); got != "43 42 10 1" || strings.Contains(text, "restored") {
		t.Errorf("the next call: %q, %q; want 43 and no second report", got, text)
	}
}

// Two serve processes on one state dir, used alternately with one handle:
// each call continues the same session, wherever its sandbox is.
func TestE2ESessionThroughTwoProcesses(t *testing.T) {
	t.Parallel()
	env := harness.BaseEnv(t, harness.StateEnv(t.TempDir()))
	var bases [2]string
	for i := range bases {
		addr := harness.FreeAddr(t)
		harness.StartProcess(t, env, "serve", "--http", addr)
		bases[i] = "http://" + addr
		harness.WaitHTTP(t, bases[i]+"/healthz")
	}
	h := sessionOf(t, harness.SDKClient(t, modern(bases[0], pyCall(defineAll, ""))), 0)
	for i, want := range []string{"42", "43", "44", "45"} {
		out := harness.SDKClient(t, modern(bases[(i+1)%2], pyCall("count = bump(count)\nprint(count)", h)))
		if got := harness.ResultStdout(t, out, 0); got != want {
			t.Fatalf("call %d through process %d: %q, want %q (%s)", i, (i+1)%2, got, want, harness.ResultText(out.Results[0]))
		}
		if text := harness.ResultText(out.Results[0]); strings.Contains(text, "restored") {
			t.Errorf("call %d restored the session although its sandbox lived: %q", i, text)
		}
	}
}

// The process that holds a session is killed with SIGKILL: the other one
// takes the session over from its last checkpoint. A checkpoint is stored
// after its call's result, and a call returns only once the checkpoint of
// the call before it is stored (SESSIONS.md), so a second call that
// changes nothing makes the first one durable before the kill.
func TestE2ESessionSurvivesKillOfItsProcess(t *testing.T) {
	t.Parallel()
	env := harness.BaseEnv(t, harness.StateEnv(t.TempDir()))
	addrA, addrB := harness.FreeAddr(t), harness.FreeAddr(t)
	a, _ := harness.StartCommand(t, env, "serve", "--http", addrA)
	harness.StartProcess(t, env, "serve", "--http", addrB)
	harness.WaitHTTP(t, "http://"+addrA+"/healthz")
	harness.WaitHTTP(t, "http://"+addrB+"/healthz")
	first := harness.SDKClient(t, modern("http://"+addrA, pyCall(defineAll, ""), pyCall("print(count)", "$session")))
	h := sessionOf(t, first, 0)
	if got := harness.ResultStdout(t, first, 1); got != "41" {
		t.Fatalf("the call after defining: %q, want 41", got)
	}
	stop(t, a, syscall.SIGKILL)
	out := harness.SDKClient(t, modern("http://"+addrB, pyCall(checkAll, h)))
	if got := harness.ResultStdout(t, out, 0); got != wantAll {
		t.Fatalf("after the kill: %q, want %q (%s)", got, wantAll, harness.ResultText(out.Results[0]))
	}
	if text := harness.ResultText(out.Results[0]); !strings.Contains(text, "restored") {
		t.Errorf("no restore report: %q", text)
	}
}

// A handle of one tenant is unknown to another, and a made-up one is
// answered the same way.
func TestE2EHandlesAreBoundToTheirTenant(t *testing.T) {
	t.Parallel()
	tokens := harness.TokensFile(t, map[string]string{"alice-token": "alice", "bob-token": "bob"})
	base := harness.StartAuthHTTP(t, map[string]string{"CODEEXEC_TOKENS_FILE": tokens})
	spec := func(token string, calls ...map[string]any) map[string]any {
		s := modern(base, calls...)
		s["headers"] = map[string]string{"Authorization": "Bearer " + token}
		return s
	}
	h := sessionOf(t, harness.SDKClient(t, spec("alice-token", pyCall("secret = 1", ""))), 0)
	var answers []string
	for _, handle := range []string{h, "0123456789abcdef0123456789abcdef"} {
		out := harness.SDKClient(t, spec("bob-token", pyCall("print(secret)", handle)))
		text := harness.ResultText(out.Results[0])
		if isErr, _ := out.Results[0]["isError"].(bool); !isErr || !strings.Contains(text, "unknown session") {
			t.Errorf("bob with handle %s: %q, want an unknown-session error", handle, text)
		}
		answers = append(answers, strings.ReplaceAll(text, handle, "HANDLE"))
	}
	if answers[0] != answers[1] {
		t.Errorf("another tenant's handle and a made-up one are answered differently:\n%s\n%s", answers[0], answers[1])
	}
	if got := harness.ResultStdout(t, harness.SDKClient(t, spec("alice-token", pyCall("print(secret)", h))), 0); got != "1" {
		t.Errorf("alice's own handle: %q", got)
	}
}

// stop signals cmd and waits for it to exit.
func stop(t *testing.T, cmd *exec.Cmd, sig syscall.Signal) {
	t.Helper()
	_ = cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("codeexec did not exit within 20s of %v", sig)
	}
}

// The model ends a session with runtime.end_session(): under 2026-07-28
// its handle is unknown afterwards; a session-based client's next call
// simply starts afresh.
func TestE2ECodeEndsItsSession(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, harness.StateEnv(t.TempDir()))
	out := harness.SDKClient(t, modern(base, pyCall("x = 1", ""), pyCall("runtime.end_session()", "$session")))
	h := sessionOf(t, out, 0)
	if text := harness.ResultText(out.Results[1]); !strings.Contains(text, "the session has ended") {
		t.Errorf("the ending call does not say so: %q", text)
	}
	again := harness.SDKClient(t, modern(base, pyCall("print(x)", h)))
	if text := harness.ResultText(again.Results[0]); !strings.Contains(text, "unknown session") {
		t.Errorf("the ended handle: %q, want unknown session", text)
	}

	c := harness.HTTPClient(t, base)
	harness.Code(t, c, "y = 2")
	harness.Code(t, c, "runtime.end_session()")
	o := harness.RunPython(t, c, map[string]any{"code": "print('y' in globals())"})
	if harness.Joined(o.Stdout()) != "False" || strings.Contains(o.Text, "session lost") {
		t.Errorf("a session-based client after ending its session: %s", o.Text)
	}
}

// A variable, a function, a class and an import survive each way a
// sandbox dies, through the real binary: a timeout, a memory bomb, and a
// SIGKILL of the sandbox's own process. Each death's call is rolled back.
func TestE2EStateSurvivesEveryDeath(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, map[string]string{"MCP_BRIDGE_MEMORY": "256m"})
	harness.Code(t, c, defineAll)
	for i, death := range []struct{ name, code string }{
		{"timeout", "count = -1\nimport time\ntime.sleep(60)"},
		{"memory bomb", "count = -1\nblocks = []\nwhile True:\n    blocks.append(bytearray(32 << 20))"},
		{"kill -9", "count = -1\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)"},
	} {
		o := harness.RunPython(t, c, map[string]any{"code": death.code, "timeout": 3})
		if !o.IsError {
			t.Fatalf("%s: the call succeeded: %s", death.name, o.Text)
		}
		after := harness.RunPython(t, c, map[string]any{"code": checkAll})
		want := fmt.Sprintf("%d 42 10 1", 42+i)
		if got := harness.Joined(after.Stdout()); got != want || after.IsError {
			t.Fatalf("after the %s: %q (%s), want %q", death.name, got, after.Text, want)
		}
		for _, s := range []string{"restored", "count", "bump", "Box", "fractions", "rolled back"} {
			if !strings.Contains(after.Text, s) {
				t.Errorf("after the %s the result does not mention %q: %s", death.name, s, after.Text)
			}
		}
	}
}

// A call the client cancels stops its sandbox, and the next call restores
// the session from its checkpoint. That result says so, and must not also
// say the earlier state is gone: the restore report, not the new sandbox
// generation, tells what came back. Over stdio the client cancels with
// notifications/cancelled. Over HTTP in an MCP session a dropped request
// is no cancellation (the session-based revisions say so): the call runs
// to its end, and TestE2EHTTPDroppedConnectionIsNotACancellation checks
// both that and an explicit cancel's restore.
func TestE2ECancelledCallIsRestoredNotReset(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		start func(t *testing.T) harness.MCPClient
	}{
		{"stdio", func(t *testing.T) harness.MCPClient { c, _ := harness.StartStdio(t, nil); return c }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := tt.start(t)
			harness.Code(t, c, "x = 1")
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			if o, err := harness.CallRunPython(ctx, c, map[string]any{"code": "import time\ntime.sleep(30)"}); err == nil {
				t.Fatalf("the call outlived its client's cancel: %s", o.Text)
			}
			after := harness.Code(t, c, "print(x)")
			if got := harness.Joined(after.Stdout()); got != "1" || !strings.Contains(after.Text, "restored the session") {
				t.Fatalf("after the cancelled call: %q, want 1 and a restore report (%s)", got, after.Text)
			}
			if strings.Contains(after.Text, "earlier state is gone") {
				t.Errorf("the restored session is said to have lost its state: %s", after.Text)
			}
		})
	}
}

// A checkpoint refused for its size leaves the session on the one before
// it; when the sandbox then dies, the restore says which calls' effects
// that checkpoint lacks, or, when no checkpoint was ever stored, that the
// session starts fresh, instead of nothing or only the interrupted call.
func TestE2ERestoreSaysWhatRefusedCheckpointsCost(t *testing.T) {
	t.Parallel()
	// A 1 MiB cap on a checkpoint: a 2 MiB value is refused.
	env := map[string]string{"CODEEXEC_CHECKPOINT_BYTES": "1048576"}
	const huge = "import os\nhuge = os.urandom(2 << 20)"
	const crash = "import os\nos._exit(1)"
	t.Run("an earlier checkpoint", func(t *testing.T) {
		t.Parallel()
		c, _ := harness.StartStdio(t, env)
		harness.Code(t, c, "small = 1")
		first := harness.Code(t, c, huge)
		// The checkpoint follows the result, so the next result reports
		// it, or this one when the refusal came before the result was
		// sent (the agent refuses before it pickles much).
		if o := harness.Code(t, c, "small = 2\nnewvar = 3"); !strings.Contains(first.Text+o.Text, "not durable") {
			t.Fatalf("the refused checkpoint was not reported: %s, then %s", first.Text, o.Text)
		}
		if o := harness.RunPython(t, c, map[string]any{"code": crash}); !o.IsError {
			t.Fatalf("os._exit succeeded: %s", o.Text)
		}
		o := harness.Code(t, c, "print(small, 'newvar' in globals(), 'huge' in globals())")
		if got := harness.Joined(o.Stdout()); got != "1 False False" {
			t.Fatalf("after the crash: %q, want the first call's state: %s", got, o.Text)
		}
		for _, s := range []string{"restored the session from its checkpoint", "small",
			"the effects of the 2 calls after that checkpoint are gone too", "over the", "rolled back"} {
			if !strings.Contains(o.Text, s) {
				t.Errorf("the restore notice does not say %q: %s", s, o.Text)
			}
		}
	})
	t.Run("no checkpoint", func(t *testing.T) {
		t.Parallel()
		c, _ := harness.StartStdio(t, env)
		harness.Code(t, c, "small = 1\n"+huge)
		harness.Code(t, c, "small = 2")
		if o := harness.RunPython(t, c, map[string]any{"code": crash}); !o.IsError {
			t.Fatalf("os._exit succeeded: %s", o.Text)
		}
		o := harness.Code(t, c, "print('small' in globals())")
		if got := harness.Joined(o.Stdout()); got != "False" {
			t.Fatalf("after the crash: %q: %s", got, o.Text)
		}
		for _, s := range []string{"before any checkpoint of it was stored", "the effects of its 2 earlier calls are gone", "starts fresh", "over the"} {
			if !strings.Contains(o.Text, s) {
				t.Errorf("the notice does not say %q: %s", s, o.Text)
			}
		}
		if strings.Contains(o.Text, "restored the session") {
			t.Errorf("the notice says the session was restored, though nothing was: %s", o.Text)
		}
	})
}

// A value pickle cannot save is named, with the part of it that cannot be
// saved, on the result after the checkpoint that left it out (checkpoints
// follow their results): before a restore loses it, not only after. The
// notice comes once, not on every call while the value stays.
func TestE2EUncheckpointedValuesAreNamedBeforeTheyAreLost(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, nil)
	// The notice usually comes with the second result; with the first
	// when its checkpoint was stored before that result was sent.
	var texts []string
	for _, code := range []string{"results = {'ok': [1, 2], 'conn': open('/tmp/x', 'w')}\nkeep = 7", "pass", "pass"} {
		texts = append(texts, harness.Code(t, c, code).Text)
	}
	const named = "not checkpointed, so lost if the sandbox stops: results (dict; open file (TextIOWrapper) at ['conn'])"
	if all := strings.Join(texts, "\n"); !strings.Contains(texts[0]+texts[1], named) {
		t.Fatalf("neither of the next results names the unsaved value: %s", all)
	} else if n := strings.Count(all, "not checkpointed"); n != 1 {
		t.Errorf("the notice came %d times in three results, though nothing changed: %s", n, all)
	}
	harness.Code(t, c, "results['conn'].close(); del results['conn']")
	if o := harness.Code(t, c, "pass"); strings.Contains(o.Text, "not checkpointed") {
		t.Errorf("a notice after the value became savable: %s", o.Text)
	}
	harness.RunPython(t, c, map[string]any{"code": "import os\nos._exit(1)"})
	if got := harness.Joined(harness.Code(t, c, "print(keep, results)").Stdout()); got != "7 {'ok': [1, 2]}" {
		t.Errorf("after the crash: %q", got)
	}
}
