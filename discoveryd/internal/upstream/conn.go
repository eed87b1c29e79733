package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/discoveryd/internal/config"
)

// Grace periods when stopping a stdio server: first it gets EOF on stdin
// (the MCP way to ask it to exit), then SIGTERM, then SIGKILL.
const (
	stopGrace = 2 * time.Second
	termGrace = 2 * time.Second
)

// conn is one live, initialised connection to a server: a child process
// for stdio, an HTTP session otherwise.
type conn struct {
	client  *client.Client
	command string // the command line, for error messages; empty for HTTP

	// stdio only.
	cmd        *exec.Cmd
	stdout     *os.File
	stderr     *ring
	stderrDone chan struct{}
	exited     chan struct{}
	exitErr    error // set before exited is closed

	lost     chan struct{} // closed when the transport reports a lost connection
	lostOnce sync.Once

	closeOnce sync.Once
}

// dial starts (stdio) or connects to (HTTP, SSE) a server and runs the
// MCP initialize handshake within ctx. root outlives the call: it bounds
// the connection's background work. notify receives server notifications.
func dial(ctx, root context.Context, cfg config.Server, baseEnv map[string]string, notify func(mcp.JSONRPCNotification), logger *slog.Logger) (*conn, error) {
	c := &conn{lost: make(chan struct{})}
	if _, ok := logger.Handler().(redactingHandler); !ok {
		logger = slog.New(redactingHandler{logger.Handler()})
	}
	var tr transport.Interface
	switch cfg.Transport {
	case config.TransportStdio:
		t, err := c.spawn(cfg, baseEnv)
		if err != nil {
			return nil, err
		}
		tr = t
	case config.TransportHTTP:
		t, err := transport.NewStreamableHTTP(cfg.URL,
			transport.WithHTTPHeaders(cfg.Headers),
			// Server-initiated notifications (tools/list_changed) arrive
			// on the listening GET stream, which servers on the session
			// revisions (up to 2025-11-25) still use.
			transport.WithContinuousListening(), //nolint:staticcheck // deprecated for 2026-07-28 only; see above
			transport.WithHTTPLogger(logger))
		if err != nil {
			return nil, fmt.Errorf("%w: server %q: bad url %q: %v", ErrStartFailed, cfg.Name, cfg.URL, err)
		}
		tr = t
	case config.TransportSSE:
		t, err := transport.NewSSE(cfg.URL, transport.WithHeaders(cfg.Headers), transport.WithSSELogger(logger))
		if err != nil {
			return nil, fmt.Errorf("%w: server %q: bad url %q: %v", ErrStartFailed, cfg.Name, cfg.URL, err)
		}
		tr = t
	default:
		return nil, fmt.Errorf("%w: server %q: unsupported transport %q", ErrStartFailed, cfg.Name, cfg.Transport)
	}
	c.client = client.NewClient(tr)
	c.client.OnNotification(notify)
	c.client.OnConnectionLost(func(error) { c.markLost() })
	if err := c.client.Start(root); err != nil {
		c.close()
		return nil, c.startError(cfg, err)
	}
	req := mcp.InitializeRequest{}
	// The initialize handshake (2025-11-25) is what every published server
	// speaks today; pinning it skips the server/discover probe that would
	// cost a round trip, or a timeout, on each start.
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "codeexec-discoveryd", Version: "1"}
	if _, err := c.client.Initialize(ctx, req); err != nil {
		c.close()
		if cfg.Transport == config.TransportHTTP && errors.Is(err, transport.ErrLegacySSEServer) {
			return dialSSE(ctx, root, cfg, notify, logger)
		}
		return nil, c.startError(cfg, err)
	}
	return c, nil
}

// dialSSE connects to an HTTP server that refused the streamable-HTTP
// initialize with a 4xx status as to an SSE server, as the MCP spec's
// backwards compatibility asks and Cursor, VS Code and Windsurf do: a
// "url" with no "type" (or "type": "http") may point at either.
func dialSSE(ctx, root context.Context, cfg config.Server, notify func(mcp.JSONRPCNotification), logger *slog.Logger) (*conn, error) {
	sse := cfg
	sse.Transport = config.TransportSSE
	c, err := dial(ctx, root, sse, nil, notify, logger)
	if err != nil {
		return nil, fmt.Errorf("%w, as an SSE server, after its streamable-HTTP initialize got a 4xx status: check the URL", err)
	}
	return c, nil
}

// spawn starts the stdio server process with its own pipes, so that this
// package, not the transport, owns Wait: it learns the exit status the
// moment the process ends.
func (c *conn) spawn(cfg config.Server, baseEnv map[string]string) (transport.Interface, error) {
	c.command = strings.Join(append([]string{cfg.Command}, cfg.Args...), " ")
	if cfg.Cwd != "" {
		// exec reports a bad Dir as the command not being found; say
		// what is really wrong.
		if fi, err := os.Stat(cfg.Cwd); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("%w: server %q: working directory %q does not exist or is not a directory (command: %s)", ErrStartFailed, cfg.Name, cfg.Cwd, c.command)
		}
	}
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = mergeEnv(baseEnv, cfg.Env)
	cmd.Dir = cfg.Cwd
	setProcAttr(cmd)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: server %q: %v", ErrStartFailed, cfg.Name, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("%w: server %q: %v", ErrStartFailed, cfg.Name, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("%w: server %q: %v", ErrStartFailed, cfg.Name, err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	closeAll(inR, outW, errW) // the child holds its own copies
	if err != nil {
		closeAll(inW, outR, errR)
		return nil, fmt.Errorf("%w: server %q: %v (command: %s)%s", ErrStartFailed, cfg.Name, err, c.command, argsHint(cfg, err))
	}
	c.cmd, c.stdout, c.stderr = cmd, outR, &ring{}
	c.stderrDone, c.exited = make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = io.Copy(c.stderr, errR)
		_ = errR.Close()
		close(c.stderrDone)
	}()
	go func() {
		c.exitErr = cmd.Wait()
		close(c.exited)
	}()
	return transport.NewIO(outR, inW, nil), nil
}

// argsHint explains a command that was not found and holds whitespace:
// most likely a whole command line in "command", which exec takes as one
// file name.
func argsHint(cfg config.Server, err error) string {
	words := strings.Fields(cfg.Command)
	notFound := errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist)
	if len(words) < 2 || !notFound {
		return ""
	}
	args, _ := json.Marshal(append(words[1:], cfg.Args...))
	return fmt.Sprintf(`; "command" holds spaces but names one program: put the program alone in "command" and its arguments in "args", e.g. "command": %q, "args": %s`, words[0], args)
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// startError explains a failed start: the exit status when the process
// died, else the handshake error, plus the stderr tail and the command.
func (c *conn) startError(cfg config.Server, err error) error {
	if c.cmd == nil {
		return fmt.Errorf("%w: server %q at %s: %v", ErrStartFailed, cfg.Name, cfg.URL, err)
	}
	reason := err.Error()
	if st, ok := c.exitStatus(500 * time.Millisecond); ok {
		reason = "the process exited (" + st + ") during the MCP handshake"
	}
	return fmt.Errorf("%w: %s", ErrStartFailed, withTail(fmt.Sprintf("server %q: %s (command: %s)", cfg.Name, reason, c.command), c.stderrTail()))
}

// crashError explains why a running connection broke during op.
func (c *conn) crashError(name, op string, err error) error {
	if c.cmd == nil {
		return fmt.Errorf("%w: connection to server %q lost during %s: %v", ErrCrashed, name, op, err)
	}
	reason := "its stdout closed"
	if st, ok := c.exitStatus(time.Second); ok {
		reason = "the process exited (" + st + ")"
	}
	return fmt.Errorf("%w: %s", ErrCrashed, withTail(fmt.Sprintf("server %q died during %s: %s (command: %s); it restarts on the next call", name, op, reason, c.command), c.stderrTail()))
}

// exitStatus waits up to d for the process to end and describes how it did.
func (c *conn) exitStatus(d time.Duration) (string, bool) {
	select {
	case <-c.exited:
	case <-time.After(d):
		return "", false
	}
	var ee *exec.ExitError
	switch {
	case c.exitErr == nil:
		return "exit status 0", true
	case errors.As(c.exitErr, &ee):
		return ee.String(), true
	}
	return c.exitErr.Error(), true
}

// stderrTail returns the stderr tail, after giving the copier a moment to
// drain what the process wrote just before exiting.
func (c *conn) stderrTail() string {
	if c.stderr == nil {
		return ""
	}
	select {
	case <-c.stderrDone:
	case <-time.After(200 * time.Millisecond):
	}
	return c.stderr.Tail()
}

func (c *conn) markLost() { c.lostOnce.Do(func() { close(c.lost) }) }

// dead reports whether the process has exited or the connection was lost.
// An HTTP server has no process: its nil exited never counts as closed.
func (c *conn) dead() bool {
	return closed(c.lost) || closed(c.exited)
}

// closed reports, without blocking, whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// close ends the connection. A stdio server gets EOF on stdin, then
// SIGTERM, then SIGKILL, and its whole process group is killed at the end
// so that nothing it spawned survives.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		if c.client != nil {
			_ = c.client.Close()
		}
		if c.cmd == nil {
			return
		}
		pid := c.cmd.Process.Pid
		select {
		case <-c.exited:
		case <-time.After(stopGrace):
			signalGroup(pid, syscall.SIGTERM)
			select {
			case <-c.exited:
			case <-time.After(termGrace):
				signalGroup(pid, syscall.SIGKILL)
				<-c.exited
			}
		}
		signalGroup(pid, syscall.SIGKILL)
		_ = c.stdout.Close()
	})
}
