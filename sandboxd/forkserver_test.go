package sandboxd_test

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/sandboxd"
)

// forkServers are the PIDs of this process's fork servers
// (codeexec-zygote).
func forkServers(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if string(comm) == "codeexec-zygote\n" && bytes.Contains(status, fmt.Appendf(nil, "\nPPid:\t%d\n", os.Getpid())) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestForkServerKilled kills sandboxd's fork server under a running
// session: that session keeps its sandbox and its state, a session
// started at once is served (by bwrap while the server is down), and
// sandboxd starts a new server that later sessions come from. Not
// parallel: it tells this service's server from others by which appeared.
func TestForkServerKilled(t *testing.T) {
	needsSandboxes(t)
	before := forkServers(t)
	c, _ := newService(t, func(cfg *sandboxd.Config) { cfg.PoolSize = 0 })
	ctx := t.Context()
	run := func(id, code string) string {
		t.Helper()
		r, err := execute(ctx, c, &sandboxv1.ExecuteRequest{SessionId: id, Code: code})
		if err != nil || r.result.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK {
			t.Fatalf("exec %q: %+v stderr %q, %v", code, r.result, r.stderr, err)
		}
		return strings.TrimSpace(r.stdout)
	}
	const init = "print(open('/proc/1/comm').read().strip())"
	// The server starts with the first sandbox; the next come from it.
	var running string
	waitUntil(t, "a session whose sandbox the fork server made", func() bool {
		running = create(t, c, "")
		return run(running, init) == "codeexec-init"
	})
	var srv int
	if now := forkServers(t); len(now) != len(before)+1 {
		t.Fatalf("fork servers %v, before the service %v: want one more", now, before)
	} else {
		for _, pid := range now {
			if !slices.Contains(before, pid) {
				srv = pid
			}
		}
	}
	run(running, "x = 42\nopen('/tmp/marker', 'w').write('kept')")

	if err := syscall.Kill(srv, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the killed fork server to be reaped", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", srv))
		return err != nil
	})
	// At once: bwrap serves new sessions unless the new server is already up.
	fresh := create(t, c, "")
	t.Logf("a session started while the server was down has PID 1 %q", run(fresh, init))
	if got := run(running, "print(x, open('/tmp/marker').read())\n"+init); got != "42 kept\ncodeexec-init" {
		t.Errorf("the running session after the kill: %q, want its state and its sandbox kept", got)
	}

	waitUntil(t, "sessions from a new fork server", func() bool {
		now := forkServers(t)
		if len(now) != len(before)+1 || slices.Contains(now, srv) {
			return false
		}
		id := create(t, c, "")
		return run(id, init) == "codeexec-init"
	})
	if got := run(running, "print(x)"); got != "42" {
		t.Errorf("the running session after the restart: %q", got)
	}
}
