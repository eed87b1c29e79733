package forkserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

// Child is a sandbox (or a spare) the server started.
type Child struct {
	// Monitor is the sandbox's outermost process, a child of this process
	// (not of the server): wait for it to learn how the sandbox ended.
	Monitor *os.Process
	// Init is a pidfd of the sandbox's PID 1. Killing it ends every
	// process of the sandbox before the monitor exits; killing the monitor
	// would leave init to die a moment later. The caller closes it.
	Init *os.File
}

// Fork starts req's sandbox. The sandbox is started once Fork returns,
// and runs on whatever becomes of the server; what fails later in its
// set-up it reports on its stderr before it exits. ctx bounds the start.
func (s *Server) Fork(ctx context.Context, req *Request) (*Child, error) {
	payload, err := req.encode()
	if err != nil {
		return nil, err
	}
	ours, theirs, err := socketpair()
	if err != nil {
		return nil, err
	}
	files := req.files(theirs)
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	err = s.send(ctx, payload, syscall.UnixRights(fds...))
	_ = theirs.Close()
	if err != nil {
		_ = ours.Close()
		return nil, fmt.Errorf("fork server: send request: %w", err)
	}
	c, err := readReport(ctx, ours)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		go reapLate(ours)
		return nil, fmt.Errorf("fork server: no sandbox in time: %w", ctx.Err())
	}
	_ = ours.Close()
	return c, err
}

// socketpair returns both ends of a SOCK_SEQPACKET pair: ours as a
// connection, theirs to send.
func socketpair() (*net.UnixConn, *os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("fork server: socketpair: %w", err)
	}
	f := os.NewFile(uintptr(fds[0]), "fork server report")
	conn, err := net.FileConn(f)
	_ = f.Close()
	if err != nil {
		_ = syscall.Close(fds[1])
		return nil, nil, fmt.Errorf("fork server: report socket: %w", err)
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		_ = conn.Close()
		_ = syscall.Close(fds[1])
		return nil, nil, fmt.Errorf("fork server: report socket: %T is not a unix socket", conn)
	}
	return uc, os.NewFile(uintptr(fds[1]), "fork server report"), nil
}

// readReport reads the monitor's report (its PID and init's, with a pidfd
// of init) or the server's refusal.
func readReport(ctx context.Context, c *net.UnixConn) (*Child, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetReadDeadline(dl)
	}
	buf, oob := make([]byte, 4096), make([]byte, syscall.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, err
	}
	var pidfd *os.File
	if msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn]); perr == nil && len(msgs) == 1 {
		if fds, perr := syscall.ParseUnixRights(&msgs[0]); perr == nil && len(fds) == 1 {
			pidfd = os.NewFile(uintptr(fds[0]), "sandbox init")
		}
	}
	line := string(buf[:n])
	if msg, ok := strings.CutPrefix(line, "error: "); ok {
		return nil, fmt.Errorf("fork server refused the sandbox: %s", strings.TrimSpace(msg))
	}
	var monitor, init int
	if _, serr := fmt.Sscanf(line, "%d %d\n", &monitor, &init); serr != nil || monitor <= 0 || pidfd == nil {
		if pidfd != nil {
			_ = pidfd.Close()
		}
		return nil, fmt.Errorf("fork server gave no sandbox (%q): it may have exited: %w", line, err)
	}
	p, err := os.FindProcess(monitor)
	if err != nil {
		_ = pidfd.Close()
		return nil, fmt.Errorf("fork server: sandbox %d: %w", monitor, err)
	}
	return &Child{Monitor: p, Init: pidfd}, nil
}

// reapLate waits for the report of a sandbox whose start was given up,
// and kills and reaps it.
func reapLate(c *net.UnixConn) {
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if child, err := readReport(ctx, c); err == nil {
		_ = child.Monitor.Kill()
		_, _ = child.Monitor.Wait()
		_ = child.Init.Close()
	}
}

// Release gives spare (made by a Fork with Hold) req's command,
// environment and stdio, which its waiting PID 2 takes before its last
// steps and the command. An error means the spare was not released (it is gone, or the
// server is); the caller should kill and reap it. ctx bounds the release.
func (s *Server) Release(ctx context.Context, spare *Child, req *Request) error {
	payload, err := req.encodeRelease(spare.Monitor.Pid)
	if err != nil {
		return err
	}
	reportR, reportW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("fork server: %w", err)
	}
	defer reportR.Close()
	fds := []int{int(req.Stdin.Fd()), int(req.Stdout.Fd()), int(req.Stderr.Fd()), int(reportW.Fd())}
	err = s.send(ctx, payload, syscall.UnixRights(fds...))
	_ = reportW.Close()
	if err != nil {
		return fmt.Errorf("fork server: send release: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = reportR.SetReadDeadline(dl)
	}
	line, err := bufio.NewReader(io.LimitReader(reportR, 4096)).ReadString('\n')
	switch {
	case line == "ok\n":
		return nil
	case strings.HasPrefix(line, "error: "):
		return fmt.Errorf("fork server could not release the spare: %s", strings.TrimSpace(strings.TrimPrefix(line, "error: ")))
	}
	return fmt.Errorf("fork server did not release the spare (%q): it may have exited: %w", line, err)
}

// send writes one message, with the descriptors in oob, to the server's
// control socket; ctx's deadline bounds the write.
func (s *Server) send(ctx context.Context, payload, oob []byte) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	dl, _ := ctx.Deadline()
	_ = s.ctl.SetWriteDeadline(dl)
	_, _, err := s.ctl.WriteMsgUnix(payload, oob, nil)
	return err
}
