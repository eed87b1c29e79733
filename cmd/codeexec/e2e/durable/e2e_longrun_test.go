package durable

// End-to-end tests of long runs (issue 39): the official SDK v2 client,
// whose requests time out at 60 s as Claude Code's do, runs a job longer
// than that to its end in a few calls; the run goes on between them in
// its sandbox, through any codeexec process on the state dir, and one
// whose process is killed is reported as interrupted.

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// longCall is one call of longclient.mjs: its job, when it returned (ms
// since the start), its result, and the progress notifications that
// arrived while it ran.
type longCall struct {
	Job      int            `json:"job"`
	MS       int64          `json:"ms"`
	Result   map[string]any `json:"result"`
	Progress []struct {
		MS       int64   `json:"ms"`
		Progress float64 `json:"progress"`
		Total    float64 `json:"total"`
		Message  string  `json:"message"`
	} `json:"progress"`
}

func (c longCall) structured() map[string]any {
	sc, _ := c.Result["structuredContent"].(map[string]any)
	return sc
}

// status is the result's status; upstream's results leave "success" out.
func (c longCall) status() string {
	if s, _ := c.structured()["status"].(string); s != "" {
		return s
	}
	if isErr, _ := c.Result["isError"].(bool); !isErr {
		return "success"
	}
	return ""
}

func (c longCall) stdout() string { return harness.Joined(harness.StrList(c.structured()["stdout"])) }

// longClient runs testdata/longclient.mjs with spec, within limit.
func longClient(t *testing.T, spec map[string]any, limit time.Duration) []longCall {
	t.Helper()
	var out struct {
		Calls []longCall `json:"calls"`
		Error string     `json:"error"`
	}
	if stderr := harness.NodeJSON(t, "longclient.mjs", spec, limit, &out); out.Error != "" {
		t.Fatalf("longclient.mjs: %s\nstderr:\n%s", out.Error, harness.TailOf(stderr, 4000))
	}
	return out.Calls
}

// job150 runs for 150 s, printing a line and reporting its progress every
// 10 s, and leaves its results in variables.
const job150 = `import time
rows = []
for i in range(15):
    time.sleep(10)
    rows.append(i * i)
    print("chunk", i, flush=True)
    runtime.progress(i + 1, 15, "chunk %d" % i)
total = sum(rows)`

// checkJob150 reads what job150 left.
const checkJob150 = "print(len(rows), total)"

// assertLongJob checks the calls of job150 and its check: a few calls,
// each running until the last, the job's output once and in order, its
// progress notifications during its calls, and its variables after it.
func assertLongJob(t *testing.T, calls []longCall) {
	t.Helper()
	var out []string
	var job []longCall
	for _, c := range calls {
		if c.Job == 0 {
			job = append(job, c)
			if s := c.stdout(); s != "" {
				out = append(out, s)
			}
		}
	}
	if n := len(job); n < 3 || n > 6 {
		t.Errorf("the 150 s job took %d calls; want a few (at 45 s each)", n)
	}
	for i, c := range job {
		want := "running"
		if i == len(job)-1 {
			want = "success"
		}
		if c.status() != want {
			t.Errorf("call %d of the job: status %q, want %q: %v", i, c.status(), want, c.Result)
		}
		if i < len(job)-1 {
			summary, _ := c.structured()["summary"].(string)
			if !strings.Contains(summary, `code=""`) || !strings.Contains(summary, "cancel=true") {
				t.Errorf("a running result does not say how to continue: %q", summary)
			}
			if h, _ := c.structured()["session"].(string); len(h) != 32 {
				t.Errorf("a running result carries no session handle: %v", c.structured())
			}
		}
		if len(c.Progress) == 0 {
			t.Errorf("call %d of the job had no progress notification", i)
		}
		for _, p := range c.Progress {
			if p.MS > c.MS {
				t.Errorf("a progress notification came after its call's result: %+v, call at %d ms", p, c.MS)
			}
		}
	}
	var want []string
	for i := range 15 {
		want = append(want, "chunk "+strconv.Itoa(i))
	}
	if got := strings.Join(out, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("the job's output over its calls: %q, want each chunk once, in order", got)
	}
	last := job[len(job)-1].Progress
	if p := last[len(last)-1]; p.Total == 0 || p.Progress != p.Total || p.Message != "chunk 14" {
		t.Errorf("the last progress notification: %+v, want the job's end", p)
	}
	check := calls[len(calls)-1]
	if check.Job != 1 || check.stdout() != "15 1015" {
		t.Errorf("the job's variables afterwards: %q (%v)", check.stdout(), check.Result)
	}
}

// Over stdio, as Claude Code runs codeexec: a session-based client, each
// request timing out at 60 s, the default yield (45 s).
func TestE2ELongRunOverStdio(t *testing.T) {
	if testing.Short() {
		t.Skip("a 150 s job")
	}
	t.Parallel()
	env := map[string]string{}
	for _, kv := range harness.BaseEnv(t, harness.StateEnv(t.TempDir())) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	calls := longClient(t, map[string]any{
		"transport": "stdio", "command": harness.Binary, "args": []string{"serve"}, "env": env, "timeoutMs": 60000,
		"jobs": []map[string]any{
			{"arguments": map[string]any{"code": job150, "timeout": 300}, "progress": true},
			{"arguments": map[string]any{"code": checkJob150}},
		},
	}, 5*time.Minute)
	assertLongJob(t, calls)
}

// Over HTTP under 2026-07-28: no protocol session, the handle names the
// run's session.
func TestE2ELongRunOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("a 150 s job")
	}
	t.Parallel()
	_, base := serveHTTP(t, harness.BaseEnv(t, harness.StateEnv(t.TempDir())))
	calls := longClient(t, map[string]any{
		"transport": "http", "url": base + "/mcp", "negotiation": map[string]any{"pin": "2026-07-28"}, "timeoutMs": 60000,
		"jobs": []map[string]any{
			{"arguments": map[string]any{"code": job150, "timeout": 300}, "progress": true},
			{"arguments": map[string]any{"code": checkJob150, "session": "$session"}},
		},
	}, 5*time.Minute)
	assertLongJob(t, calls)
}

// Two serve processes on one state dir, each call through the other: the
// run lives in the sandboxd of the first, and the second reaches it
// through its socket. A session-based client over HTTP continues the run
// by the handle the running result gives it.
func TestE2ELongRunThroughTwoProcesses(t *testing.T) {
	t.Parallel()
	extra := harness.StateEnv(t.TempDir())
	extra["CODEEXEC_YIELD"] = "3s"
	env := harness.BaseEnv(t, extra)
	var urls []string
	for range 2 {
		_, base := serveHTTP(t, env)
		urls = append(urls, base+"/mcp")
	}
	job := "import time\nfor i in range(8):\n    print('tick', i, flush=True)\n    time.sleep(1.5)\ndone = 'yes'"
	calls := longClient(t, map[string]any{
		"transport": "http", "urls": urls, "timeoutMs": 60000,
		"jobs": []map[string]any{
			{"arguments": map[string]any{"code": job, "timeout": 60}},
			{"arguments": map[string]any{"code": "print(done)", "session": "$session"}},
		},
	}, 3*time.Minute)
	var out []string
	for _, c := range calls[:len(calls)-1] {
		if s := c.stdout(); s != "" {
			out = append(out, s)
		}
	}
	if len(calls) < 4 || calls[len(calls)-2].status() != "success" {
		t.Fatalf("calls: %d, the last of the job %q; want it to yield and end (%v)", len(calls), calls[len(calls)-2].status(), calls[len(calls)-2].Result)
	}
	if got := strings.Join(out, "\n"); got != "tick 0\ntick 1\ntick 2\ntick 3\ntick 4\ntick 5\ntick 6\ntick 7" {
		t.Errorf("the job's output through both processes: %q", got)
	}
	if got := calls[len(calls)-1].stdout(); got != "yes" {
		t.Errorf("after the job: %q", got)
	}
}

// kill -9 of the serve process that runs a long run: the next call,
// through another process on the state dir, says the run was interrupted
// and restores the session as it was before the run.
func TestE2ELongRunOfAKilledProcessIsInterrupted(t *testing.T) {
	t.Parallel()
	extra := harness.StateEnv(t.TempDir())
	extra["CODEEXEC_YIELD"] = "2s"
	env := harness.BaseEnv(t, extra)
	a, baseA := serveHTTP(t, env)
	_, baseB := serveHTTP(t, env)
	first := harness.SDKClient(t, modern(baseA, pyCall("x = 1", ""),
		pyCall("x = 2\nimport time\ntime.sleep(120)", "$session")))
	h := sessionOf(t, first, 0)
	if sc, _ := first.Results[1]["structuredContent"].(map[string]any); sc["status"] != "running" {
		t.Fatalf("the long call: %v; want it running", first.Results[1])
	}
	stop(t, a, syscall.SIGKILL)
	out := harness.SDKClient(t, modern(baseB, pyCall("", h), pyCall("print(x)", h)))
	sc, _ := out.Results[0]["structuredContent"].(map[string]any)
	if sc["status"] != "interrupted" || !strings.Contains(harness.ResultText(out.Results[0]), "was interrupted") ||
		!strings.Contains(harness.ResultText(out.Results[0]), "restored the session") {
		t.Errorf("the wait after the kill: %s", harness.ResultText(out.Results[0]))
	}
	if got := harness.ResultStdout(t, out, 1); got != "1" {
		t.Errorf("x after the interrupted run: %q, want 1", got)
	}
}

// With the services split, the run lives in sandboxd: the gateway that
// started it is killed (kill -9) and another gateway continues it, its
// output whole and its variables there.
func TestE2ELongRunOutlivesItsGateway(t *testing.T) {
	t.Parallel()
	env := harness.BaseEnv(t, map[string]string{"CODEEXEC_YIELD": "2s"})
	dir := t.TempDir()
	memSock := "unix:" + dir + "/memoryd.sock"
	sbAddr := harness.FreeAddr(t)
	harness.StartProcess(t, env, "memoryd", "--listen", memSock, "--db", dir+"/codeexec.db", "--metrics", "")
	harness.WaitHealth(t, memSock)
	harness.StartProcess(t, env, "sandboxd", "--listen", sbAddr, "--memory-addr", memSock, "--metrics", "", "--pool", "1")
	harness.WaitHealth(t, sbAddr)
	gateway := func() (*exec.Cmd, string) {
		addr := harness.FreeAddr(t)
		cmd, _ := harness.StartCommand(t, env, "gateway", "--sandbox", sbAddr, "--http", addr)
		harness.WaitHTTP(t, "http://"+addr+"/healthz")
		return cmd, "http://" + addr
	}
	a, baseA := gateway()
	_, baseB := gateway()
	first := harness.SDKClient(t, modern(baseA, pyCall("import time\nfor i in range(4):\n    print('step', i, flush=True)\n    time.sleep(1)\nleft = 'by the run'", "")))
	h := sessionOf(t, first, 0)
	if sc, _ := first.Results[0]["structuredContent"].(map[string]any); sc["status"] != "running" {
		t.Fatalf("the long call: %v; want it running", first.Results[0])
	}
	stop(t, a, syscall.SIGKILL)
	// Waits until the run's end (idle after it), then a look at its
	// variables.
	calls := []map[string]any{}
	for range 6 {
		calls = append(calls, pyCall("", h))
	}
	out := harness.SDKClient(t, modern(baseB, append(calls, pyCall("print(left)", h))...))
	got := harness.ResultStdout(t, first, 0)
	for i := range 6 {
		if sc, _ := out.Results[i]["structuredContent"].(map[string]any); len(harness.StrList(sc["stdout"])) > 0 {
			got += "\n" + harness.Joined(harness.StrList(sc["stdout"]))
		}
	}
	if got != "step 0\nstep 1\nstep 2\nstep 3" {
		t.Errorf("the run's output through both gateways: %q", got)
	}
	if got := harness.ResultStdout(t, out, 6); got != "by the run" {
		t.Errorf("after the run: %q", got)
	}
}

// Over stdio under 2026-07-28: the handle names the run, as over HTTP.
func TestE2ELongRunModernStdio(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	extra := harness.StateEnv(t.TempDir())
	extra["CODEEXEC_YIELD"] = "2s"
	for _, kv := range harness.BaseEnv(t, extra) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	calls := longClient(t, map[string]any{
		"transport": "stdio", "command": harness.Binary, "args": []string{"serve"}, "env": env,
		"negotiation": map[string]any{"pin": "2026-07-28"}, "timeoutMs": 60000,
		"jobs": []map[string]any{
			{"arguments": map[string]any{"code": "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(1.5)\nn = 3"}},
			{"arguments": map[string]any{"code": "print(n)", "session": "$session"}},
		},
	}, 2*time.Minute)
	var out []string
	for _, c := range calls[:len(calls)-1] {
		if s := c.stdout(); s != "" {
			out = append(out, s)
		}
	}
	if len(calls) < 3 || calls[0].status() != "running" || strings.Join(out, "\n") != "0\n1\n2" {
		t.Errorf("the job over stdio under 2026-07-28: %d calls, first %q, output %q", len(calls), calls[0].status(), out)
	}
	if got := calls[len(calls)-1].stdout(); got != "3" {
		t.Errorf("after the job: %q", got)
	}
}
