package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// runFunc calls run_python with code and says how long the call took.
type runFunc func(code string) (*mcp.CallToolResult, time.Duration, error)

// startStdio starts this very binary as `codeexec serve` with a warm pool
// of one and a state directory of its own, as an MCP client over stdio
// does, and initializes it. stop ends the server and removes its state.
func startStdio(ctx context.Context, version string, forkServer bool) (run runFunc, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	home, err := os.MkdirTemp("", "codeexec-bench-")
	if err != nil {
		return nil, nil, err
	}
	c, err := client.NewStdioMCPClient(self, []string{"HOME=" + home, "MCP_BRIDGE_STATE_DIR=" + home, "CODEEXEC_POOL_SIZE=1",
		"MCP_BRIDGE_LOG_LEVEL=error", fmt.Sprintf("CODEEXEC_FORK_SERVER=%t", forkServer)}, "serve")
	if err != nil {
		_ = os.RemoveAll(home)
		return nil, nil, err
	}
	stop = func() {
		_ = c.Close()
		_ = os.RemoveAll(home)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION // a session-based client
	init.Params.ClientInfo = mcp.Implementation{Name: "codeexec-bench", Version: version}
	if _, err := c.Initialize(ctx, init); err != nil {
		stop()
		return nil, nil, err
	}
	run = func(code string) (*mcp.CallToolResult, time.Duration, error) {
		req := mcp.CallToolRequest{}
		req.Params.Name = "run_python"
		req.Params.Arguments = map[string]any{"code": code}
		start := time.Now()
		res, err := c.CallTool(ctx, req)
		if err == nil && res.IsError {
			err = fmt.Errorf("run_python failed: %v", res.Content)
		}
		return res, time.Since(start), err
	}
	return run, stop, nil
}

// warmPair is what benchWarmStdio measured: the round trips to the fork
// server's sandbox and to bwrap's, and how many sandboxes the fork
// server's session ended before it had one from the server.
type warmPair struct {
	fork, bwrap stats
	ended       int
}

// benchWarmStdio measures run_python("pass") over MCP stdio against two
// new `codeexec serve` processes, one with the fork server and one
// without, taking turns call by call (ABBA), so that both see the same
// load: on a shared machine, rows timed one after the other differed by
// more than the engines did. The fork server's session first ends its
// sandbox until one came from the server.
func benchWarmStdio(ctx context.Context, n int, version string) (warmPair, error) {
	var r warmPair
	forkRun, stopFork, err := startStdio(ctx, version, true)
	if err != nil {
		return r, err
	}
	defer stopFork()
	// The session's first sandbox comes from the pool, which waits for
	// the fork server while it starts; a call made before the pool is
	// full gets a sandbox from bwrap: end sandboxes until one was forked.
	if r.ended, err = untilForked(forkRun); err != nil {
		return r, err
	}
	bwrapRun, stopBwrap, err := startStdio(ctx, version, false)
	if err != nil {
		return r, err
	}
	defer stopBwrap()
	runs := [2]runFunc{forkRun, bwrapRun}
	for _, run := range runs {
		for range 10 {
			if _, _, err := run("pass"); err != nil {
				return r, err
			}
		}
	}
	// Let both servers finish refilling their pools and spares, which
	// the calls above may have set off, before the timed calls.
	time.Sleep(500 * time.Millisecond)
	var d [2][]time.Duration
	for i := range 2 * n {
		// ABBA: each server goes first in every other pair.
		k := i % 2
		if (i/2)%2 == 1 {
			k = 1 - k
		}
		_, t, err := runs[k]("pass")
		if err != nil {
			return r, err
		}
		d[k] = append(d[k], t)
	}
	r.fork, r.bwrap = summarize(d[0]), summarize(d[1])
	return r, nil
}

// isForked reports whether the session's sandbox came from the fork
// server, whose sandboxes' PID 1 is codeexec-init (bwrap's is bwrap).
func isForked(run runFunc) (bool, error) {
	res, _, err := run("print(open('/proc/1/comm').read().strip())")
	if err != nil {
		return false, err
	}
	return strings.Contains(fmt.Sprint(res.StructuredContent), "codeexec-init"), nil
}

// untilForked ends the session's sandbox (the next call restores the
// session into a new one) until its sandbox is one the fork server made,
// and returns how many it ended.
func untilForked(run runFunc) (int, error) {
	for ended := range 20 {
		forked, err := isForked(run)
		if err != nil || forked {
			return ended, err
		}
		_, _, _ = run("import os; os._exit(0)")
		time.Sleep(300 * time.Millisecond)
	}
	return 20, errors.New("no sandbox from the fork server after 20 tries")
}

// firstSession is what benchFirstSession measured: the calls, the
// sessions whose sandbox was forked, and the PSS of each server's process
// tree before its first call.
type firstSession struct {
	first, second stats
	forked, n     int
	rest          []int64
}

// benchFirstSession starts n new `codeexec serve` processes one after
// another, and on each, after pause (a user writing the first prompt),
// measures the memory of its process tree at rest and times the first
// session's first two calls: the second waits for the first call's
// checkpoint. It counts the sessions whose sandbox came from the fork
// server. No other sandbox may run below this process meanwhile.
func benchFirstSession(ctx context.Context, n int, pause time.Duration, version string) (firstSession, error) {
	var first, second []time.Duration
	r := firstSession{n: n}
	for range n {
		run, stop, err := startStdio(ctx, version, true)
		if err != nil {
			return r, err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			stop()
			return r, ctx.Err()
		}
		total, _ := treeMemory()
		r.rest = append(r.rest, total)
		_, a, err := run("x = 1")
		if err == nil {
			var b time.Duration
			var forked bool
			if _, b, err = run("x += 1"); err == nil {
				second = append(second, b)
				if forked, err = isForked(run); forked {
					r.forked++
				}
			}
		}
		stop()
		if err != nil {
			return r, err
		}
		first = append(first, a)
	}
	r.first, r.second = summarize(first), summarize(second)
	return r, nil
}
