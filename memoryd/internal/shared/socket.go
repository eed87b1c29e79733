package shared

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

// Protocol is the version of what the owner's socket speaks (StoreService
// and its rules). Processes with different protocols never talk: each
// listens on a socket named after its own, and a process that finds the
// database held by an owner of another protocol says so, naming both
// versions. It is a variable so that a test can build a binary that speaks
// another one (-ldflags -X).
var Protocol = "1"

// SocketPath is the unix socket beside the database on which its owner
// serves StoreService.
func SocketPath(db string) string { return db + ".v" + Protocol + ".sock" }

// maxSunPath is the room in sockaddr_un's sun_path, less the NUL.
const maxSunPath = 107

// viaDirFD runs fn with a path that names path's file and fits sun_path:
// path itself when it is short enough, else /proc/self/fd/N/<name> through
// an O_PATH descriptor of its directory, which the kernel resolves like
// the directory itself. Test and user state dirs can be long.
func viaDirFD(path string, fn func(p string) error) error {
	if len(path) <= maxSunPath {
		return fn(path)
	}
	fd, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open directory of socket %s: %w", path, err)
	}
	defer unix.Close(fd)
	short := "/proc/self/fd/" + strconv.Itoa(fd) + "/" + filepath.Base(path)
	if len(short) > maxSunPath {
		return fmt.Errorf("socket name %s is too long for a unix socket", filepath.Base(path))
	}
	return fn(short)
}

// listen binds the owner's socket: a stale file from a killed owner is
// removed (only the lock holder calls this, so it cannot be a live
// owner's), the socket gets mode 0600, and connections from other users
// are refused.
func listen(path string, logger *slog.Logger) (net.Listener, error) {
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
	return &peerListener{Listener: lis, logger: logger}, nil
}

// peerListener accepts only connections from processes of this user.
type peerListener struct {
	net.Listener
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
		l.logger.Warn("refused a connection to the shared memory socket from another user",
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

// dial connects to the owner's socket and checks that the owner runs as
// this user, so that memory is never handed to another user's process.
func dialSocket(ctx context.Context, path string) (net.Conn, error) {
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
		return nil, fmt.Errorf("the shared memory socket %s: cannot tell which user serves it, so refusing to use it: %w", path, err)
	}
	if uid != os.Getuid() {
		_ = c.Close()
		return nil, fmt.Errorf("the shared memory socket %s is served by uid %d, not by this user (uid %d): refusing to use it", path, uid, os.Getuid())
	}
	return c, nil
}
