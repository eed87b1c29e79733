package forkserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const python = "/usr/bin/python3"

// TestRequestRoundTrip encodes requests and has the server's own parser
// (Request in codeexec_forkserver.py) read them back.
func TestRequestRoundTrip(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s is missing: apt-get install python3", python)
	}
	dir := t.TempDir()
	entries, err := scripts.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, _ := scripts.ReadFile(e.Name())
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree := os.Stdin // any open file: only its position in the list matters
	tests := []struct {
		name string
		req  Request
		fds  int // descriptors sent along
		want map[string]any
	}{
		{"agent from the server", Request{
			Mode: ModeAgent, Argv: []string{python, "-I", "/opt/codeexec/agent.py"},
			Env:         map[string]string{"HOME": "/workspace", "B": "x=y z", "A": ""},
			ServerAgent: true, TmpBytes: 1 << 20, WorkspaceBytes: 2 << 20,
			Rlimits: []Rlimit{{4, 0}, {7, 1024}}, Cgroups: []*os.File{tree, tree},
		}, 6, map[string]any{
			"mode": "agent", "agent": "server", "tmp": float64(1 << 20), "workspace": float64(2 << 20),
			"rlimits": []any{[]any{4., 0.}, []any{7., 1024.}}, "argv": []any{python, "-I", "/opt/codeexec/agent.py"},
			"env": []any{"A", "", "B", "x=y z", "HOME", "/workspace"}, "stdio": []any{10., 11., 12.}, "report": 13.,
			"tree": -1., "cgroups": []any{14., 15.},
		}},
		{"script, another agent, no limits", Request{
			Mode: ModeScript, Argv: []string{python, "-I", "-c", "print('a\\tb')", "arg"},
			AgentTree: tree, Cgroups: []*os.File{tree},
		}, 6, map[string]any{
			"mode": "script", "agent": "tree", "tmp": 0., "workspace": 0., "rlimits": []any{},
			"argv": []any{python, "-I", "-c", "print('a\\tb')", "arg"}, "env": []any{},
			"stdio": []any{10., 11., 12.}, "report": 13., "tree": 14., "cgroups": []any{15.},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if n := len(tc.req.files(tree)); n != tc.fds {
				t.Errorf("%d descriptors, want %d", n, tc.fds)
			}
			payload, err := tc.req.encode()
			if err != nil {
				t.Fatal(err)
			}
			in := filepath.Join(t.TempDir(), "req")
			if err := os.WriteFile(in, payload, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(python, "-I", "-c", `
import json, sys
sys.path.insert(0, sys.argv[1])
import codeexec_forkserver as f
r = f.Request(open(sys.argv[2], "rb").read(), list(range(10, 10 + int(sys.argv[3]))))
d = lambda b: b.decode()
print(json.dumps({"mode": d(r.mode), "agent": d(r.agent), "tmp": r.tmp, "workspace": r.workspace,
    "rlimits": r.rlimits, "argv": [d(a) for a in r.argv], "env": [d(e) for e in r.env],
    "stdio": r.stdio, "report": r.report, "tree": r.tree, "cgroups": r.cgroups}))`, dir, in, "6").CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			var got map[string]any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("the server read (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"no mode", Request{Argv: []string{"x"}}, "unknown mode"},
		{"no command", Request{Mode: ModeExec}, "empty command"},
		{"NUL in the command", Request{Mode: ModeExec, Argv: []string{"a\x00b"}}, "holds NUL"},
		{"NUL in the environment", Request{Mode: ModeExec, Argv: []string{"a"}, Env: map[string]string{"A": "\x00"}}, "holds NUL"},
		{"too large", Request{Mode: ModeExec, Argv: []string{strings.Repeat("x", maxRequest)}}, "exceeds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := tc.req.encode(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("encode() = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestSupervisorWithoutServer supervises a server that cannot start: there
// is never a server to use, Wait says why it gave up, Ready says at once
// that there is none, and Close ends it.
func TestSupervisorWithoutServer(t *testing.T) {
	t.Parallel()
	s := Supervise(Config{Python: "/nonexistent/python3", Logger: slog.New(slog.DiscardHandler)}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if srv, err := s.Wait(ctx); srv != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait = %v, %v; want no server before the deadline", srv, err)
	}
	if s.Server() != nil {
		t.Error("Server() returned a server that cannot have started")
	}
	// Ready waits only while a start is under way: once the first has
	// failed it says there is no server, long before its deadline.
	ctx, cancel = context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if srv, err := s.Ready(ctx); srv != nil || err != nil {
		t.Errorf("Ready = %v, %v; want no server and no error once the start has failed", srv, err)
	}
	s.Close()
	s.Close()
	if _, err := s.Wait(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Ready(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Ready after Close = %v, want ErrClosed", err)
	}
}

// requireServerHost fails the test where a real server cannot start.
func requireServerHost(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root: the server runs as the sandbox uid, which only root may give it")
	}
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s is missing: apt-get install python3", python)
	}
}

// serverConfig is a real server's config for python, with no agent.
func serverConfig() Config {
	return Config{
		Python: python, Env: map[string]string{},
		Passwd: "nobody:x:65534:65534::/workspace:/bin/false\n", Group: "nogroup:x:65534:\n",
		Logger: slog.New(slog.DiscardHandler),
	}
}

// TestSupervisorReadyWaitsForTheStart holds a real server's start in its
// trial: Ready waits while the start is under way, says there is no server
// once that start has failed, and returns the next one that passes.
func TestSupervisorReadyWaitsForTheStart(t *testing.T) {
	t.Parallel()
	requireServerHost(t)
	verdicts := make(chan error)
	s := Supervise(serverConfig(), func(ctx context.Context, _ *Server) error {
		select {
		case err := <-verdicts:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	t.Cleanup(s.Close)
	type ready struct {
		srv *Server
		err error
	}
	await := func() chan ready {
		c := make(chan ready, 1)
		go func() {
			srv, err := s.Ready(t.Context())
			c <- ready{srv, err}
		}()
		return c
	}

	first := await()
	time.Sleep(200 * time.Millisecond)
	select {
	case r := <-first:
		t.Fatalf("Ready returned %v, %v while the first start was still in its trial", r.srv, r.err)
	default:
	}
	verdicts <- errors.New("the trial refuses this server") // the first start's trial ends here
	if r := <-first; r.srv != nil || r.err != nil {
		t.Errorf("Ready after a failed start = %v, %v; want no server and no error", r.srv, r.err)
	}
	verdicts <- nil // the second start, after the pause, passes its trial
	r := <-await()
	if r.srv == nil || r.err != nil {
		t.Fatalf("Ready after a start that passed = %v, %v; want that server", r.srv, r.err)
	}
	if got := s.Server(); got != r.srv {
		t.Errorf("Server() = %v, want the server Ready returned, %v", got, r.srv)
	}
}

// TestSupervisorClosedWhileStartingWarnsOfNothing closes a supervisor
// while its server's start is under way (held in the trial): the start
// ends with the context's error, which is the Close, not a server that is
// unavailable, so nothing is logged as a warning.
func TestSupervisorClosedWhileStartingWarnsOfNothing(t *testing.T) {
	t.Parallel()
	requireServerHost(t)
	// A file, whose writes the server's goroutines may make at once.
	logs, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	cfg := serverConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	inTrial := make(chan struct{})
	s := Supervise(cfg, func(ctx context.Context, _ *Server) error {
		close(inTrial)
		<-ctx.Done()
		return ctx.Err()
	})
	<-inTrial
	s.Close()
	got, err := os.ReadFile(logs.Name())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "level=WARN") {
		t.Errorf("Close during a start logged %q, want no warning", got)
	}
}

// TestServerRefusals sends a real server requests it must refuse: a spare
// request it cannot read, whose refusal comes back on the spare's report
// socket, and the release of a spare it does not hold. Each is refused
// with the server's reason, not after a timeout, and the server goes on
// forking.
func TestServerRefusals(t *testing.T) {
	t.Parallel()
	requireServerHost(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, serverConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	// A spare request cut short: the server cannot read its limits.
	ours, theirs, err := socketpair()
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	err = s.send(ctx, []byte("hold1\x00x"), syscall.UnixRights(int(theirs.Fd())))
	_ = theirs.Close()
	if err != nil {
		t.Fatal(err)
	}
	if c, err := readReport(ctx, ours); c != nil || err == nil || !strings.Contains(err.Error(), "fork server refused the sandbox") {
		t.Errorf("a bad spare request gave %v, %v; want the server's refusal", c, err)
	}

	// stdio returns a script's request with the sandbox's ends of its
	// pipes, and ours: stdin's write end, stdout's and stderr's read ends.
	stdio := func() (*Request, [3]*os.File) {
		t.Helper()
		req := &Request{Mode: ModeScript, Argv: []string{python, "-I", "-c", "print('forked')"}, Env: map[string]string{}}
		var ours [3]*os.File
		for i, theirs := range []**os.File{&req.Stdin, &req.Stdout, &req.Stderr} {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				r, w = w, r
			}
			*theirs, ours[i] = w, r
			t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
		}
		return req, ours
	}

	// A release for a spare the server does not hold.
	req, _ := stdio()
	self, _ := os.FindProcess(os.Getpid())
	if err := s.Release(ctx, &Child{Monitor: self}, req); err == nil || !strings.Contains(err.Error(), "no such spare") {
		t.Errorf("releasing a spare the server does not hold: %v, want its refusal: no such spare", err)
	}

	// The server is still there, and forks.
	req, pipes := stdio()
	c, err := s.Fork(ctx, req)
	if err != nil {
		t.Fatalf("a fork after the refusals: %v", err)
	}
	defer c.Init.Close()
	for _, f := range []*os.File{req.Stdin, req.Stdout, req.Stderr} {
		_ = f.Close()
	}
	out, _ := io.ReadAll(pipes[1])
	errOut, _ := io.ReadAll(pipes[2])
	st, err := c.Monitor.Wait()
	if err != nil || !st.Success() || string(out) != "forked\n" {
		t.Errorf("the forked sandbox printed %q (stderr %q) and ended %v, %v", out, errOut, st, err)
	}
}
