// Package usersock serves and dials unix sockets that only processes of
// the same user may use: codeexec processes on one machine reach one
// another through them (the memory database's owner, the sandboxes of
// another serve process). A socket gets mode 0600, and both ends check the
// peer's uid (SO_PEERCRED), so the mode's brief absence between bind and
// chmod lets no one in either.
package usersock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/codeexec/codeexec/services/logkeys"
)

// MaxSunPath is the room in sockaddr_un's sun_path, less the NUL.
const MaxSunPath = 107

// viaDirFD runs fn with a path that names path's file and fits sun_path:
// path itself when it is short enough, else /proc/self/fd/N/<name> through
// an O_PATH descriptor of its directory, which the kernel resolves like
// the directory itself. Test and user state dirs can be long.
func viaDirFD(path string, fn func(p string) error) error {
	if len(path) <= MaxSunPath {
		return fn(path)
	}
	fd, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open directory of socket %s: %w", path, err)
	}
	defer unix.Close(fd)
	short := "/proc/self/fd/" + strconv.Itoa(fd) + "/" + filepath.Base(path)
	if len(short) > MaxSunPath {
		return fmt.Errorf("socket name %s is too long for a unix socket", filepath.Base(path))
	}
	return fn(short)
}

// Listen binds a socket at path: a stale file there is removed (the
// caller must know that no live process serves it), the socket gets mode
// 0600, and connections from other users are refused and logged; what
// names the socket in that log.
func Listen(path, what string, logger *slog.Logger) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket; remove it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	var lis net.Listener
	err := viaDirFD(path, func(p string) error {
		var err error
		lis, err = net.Listen("unix", p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// net.UnixListener unlinks the path it bound on Close; the path may
	// be the /proc alias, so the owner removes the real path itself.
	if ul, ok := lis.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(false)
	}
	// The umask is process-wide, so it cannot narrow the mode for this
	// one bind without racing other goroutines' files. Between bind and
	// chmod, the peer check below is what keeps other users out.
	if err := os.Chmod(path, 0o600); err != nil {
		_ = lis.Close()
		return nil, fmt.Errorf("set permissions of %s: %w", path, err)
	}
	return &peerListener{Listener: lis, what: what, logger: logger}, nil
}

// peerListener accepts only connections from processes of this user.
type peerListener struct {
	net.Listener
	what   string
	logger *slog.Logger
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, pid, err := peerCred(c)
		if err == nil && uid == os.Getuid() {
			return c, nil
		}
		l.logger.Warn("refused a connection to "+l.what+" from another user",
			slog.Int("peer.uid", uid), slog.Int("peer.pid", pid), slog.Any(logkeys.Error, err))
		_ = c.Close()
	}
}

// peerCred returns the uid and pid of the process at the other end of a
// unix socket.
func peerCred(c net.Conn) (uid, pid int, err error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, 0, errors.New("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, 0, err
	}
	if cerr != nil {
		return -1, 0, cerr
	}
	return int(cred.Uid), int(cred.Pid), nil
}

// Dial connects to the socket at path and checks that the process serving
// it runs as this user, so that nothing is handed to another user's
// process; what names the socket in the error.
func Dial(ctx context.Context, path, what string) (net.Conn, error) {
	var c net.Conn
	err := viaDirFD(path, func(p string) error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "unix", p)
		return err
	})
	if err != nil {
		return nil, err
	}
	uid, _, err := peerCred(c)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%s %s: cannot tell which user serves it, so refusing to use it: %w", what, path, err)
	}
	if uid != os.Getuid() {
		_ = c.Close()
		return nil, fmt.Errorf("%s %s is served by uid %d, not by this user (uid %d): refusing to use it", what, path, uid, os.Getuid())
	}
	return c, nil
}
