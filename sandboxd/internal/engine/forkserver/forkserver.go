// Package forkserver starts bwrap-equivalent sandboxes in a few
// milliseconds: a server process that has started the interpreter and
// imported the agent forks each sandbox, which then sets up exactly the
// isolation bwrapArgs asks bwrap for (package bwrap).
//
// The server (codeexec_forkserver.py) runs as uid 0 in a user namespace of
// its own that maps only the host uid it was started as (Config.UID), with
// no groups, and that uid owns; it never runs user code. For each sandbox
// it clones:
//
//   - the monitor, with CLONE_PARENT, so that it is sandboxd's own child:
//     sandboxd waits for it and kills it, its death signal fires when
//     sandboxd dies, and it does not depend on the server, which may die
//     or be restarted under running sandboxes. It joins the sandbox's
//     cgroups by writing "0" to their files (a v1 task moving itself
//     skips the global lock that a move by PID takes, which waits for an
//     RCU grace period: docs/PERFORMANCE.md) and sets the rlimits, so that
//     everything below it starts inside its limits;
//   - init, in new PID, mount, network, IPC, UTS and cgroup namespaces: it
//     builds the sandbox's root (the mounts bwrap makes), pivots into it
//     and detaches the server's root, then enters two nested user
//     namespaces (uid 65534 inside; the outer allows no further user
//     namespace, as bwrap --disable-userns), and forks
//   - the sandbox, PID 2, which drops every capability, keeps
//     no_new_privs, installs the same seccomp filter and runs the agent.
//
// The monitor reports its PID and a pidfd of init: killing init ends the
// whole PID namespace before init, and then the monitor, exit, so once
// the monitor is reaped nothing of the sandbox runs. A request with Hold
// makes a spare, whose PID 2 is forked and has dropped its capabilities,
// then waits until Release brings the command and stdio: all but its last
// steps (its name, signals and the seccomp filter) is done ahead.
//
// Each sandbox gets its own copy-on-write address space: no mapping the
// server holds is shared and writable, and the server receives nothing
// but what every sandbox of one sandboxd shares (command line, environment,
// limits), so that the memory every sandbox inherits holds nothing of any
// session. What a forked interpreter does share with its siblings is state
// fixed at the server's start: the string hash secret (it cannot change
// once strings are hashed), the address layout and the stack canary.
package forkserver

import (
	"bufio"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/tempdir"
)

// scripts are the server's Python: codeexec_forkserver.py, the entry, and
// the modules it imports.
//
//go:embed *.py
var scripts embed.FS

// Config is what one server is made for.
type Config struct {
	// Python is the interpreter the server runs (a host path; sandboxes
	// see the host's /usr).
	Python string
	// AgentDir holds the agent (agent.Entry and its modules); the server
	// imports it once, for every sandbox, and can give it to them. ""
	// imports nothing. Server.Config has it with symbolic links resolved.
	AgentDir string
	// Env is the environment the server starts with. A sandbox with
	// exactly this environment may run in the forked interpreter; any
	// other must be executed (ModeExec).
	Env map[string]string
	// Seccomp is the BPF filter every sandbox installs (package seccomp).
	Seccomp []byte
	// Passwd and Group are the sandbox's /etc/passwd and /etc/group on
	// the host's /usr; an environment has its own.
	Passwd, Group string
	// UID is the host uid (and gid) the server and every sandbox run as,
	// which owns their user namespaces: the kernel charges what the
	// sandboxes make to it. It must be used by nothing else. 0 is
	// engine.DefaultHostUID.
	UID int
	// Root is the environment's root file system that the server and its
	// sandboxes run in (Python is then a path inside it); "" is the
	// host's /usr with Etc, the host's /etc pieces (engine.HostEtc).
	Root string
	Etc  []string
	// Preload are modules the server imports before it forks, beside the
	// agent: an environment's heavy modules, whose import every sandbox
	// then skips. One that fails to import is logged and left out.
	Preload []string
	// Mounts are bound into the template every sandbox's root copies:
	// the server serves only specs with exactly these mounts.
	Mounts []engine.Mount
	// Logger receives what the server writes to its stderr.
	Logger *slog.Logger
}

// Server is one running fork server.
type Server struct {
	cfg  Config
	cmd  *exec.Cmd
	dir  string       // tmp's path
	tmp  *tempdir.Dir // the scripts and the sandboxes' root mount point
	done chan struct{}
	// unshare is util-linux's unshare(1), which makes the server's
	// namespaces as the server's own uid (command).
	unshare string

	sendMu sync.Mutex // serialises a write deadline with its write
	ctl    *net.UnixConn
}

// bootScript starts a server in an environment. It runs in the
// environment's tree (unshare's --root), imports what the server needs
// before it has a root of its own again (the host's /usr may have no
// such Python), and returns to the root of its mount namespace: a chroot
// into a directory below its working directory leaves that directory
// outside the root, from where ".." climbs to the namespace's root (its
// capabilities in its own user namespace allow both). Then it runs the
// server's script (argv[1]) as __main__.
const bootScript = `import os, sys
import _socket, atexit, builtins, ctypes, fcntl, gc, resource, select, signal
os.chdir("/")
os.chroot("/tmp")
for _ in range(256):
    os.chdir("..")
os.chroot(".")
sys.argv = sys.argv[1:]
path = sys.argv[0]
with open(path, "rb") as f:
    code = compile(f.read(), path, "exec")
exec(code, {"__name__": "__main__", "__file__": path, "__builtins__": builtins})
`

// Start starts a server and waits until it is ready to fork. ctx bounds
// the start only.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	tmp, err := tempdir.Make("", "codeexec-fork-")
	if err != nil {
		return nil, fmt.Errorf("fork server: %w", err)
	}
	if cfg.UID == 0 {
		cfg.UID = engine.DefaultHostUID
	}
	unshare, err := engine.LookPath("unshare")
	if err != nil {
		_ = tmp.Remove()
		return nil, fmt.Errorf("fork server: unshare is not installed: run `apt-get install util-linux`: %w", err)
	}
	s := &Server{cfg: cfg, dir: tmp.Path, tmp: tmp, done: make(chan struct{}), unshare: unshare}
	if err := s.start(ctx); err != nil {
		if s.ctl != nil {
			_ = s.ctl.Close()
		}
		_ = tmp.Remove()
		return nil, fmt.Errorf("fork server: %w", err)
	}
	return s, nil
}

func (s *Server) start(ctx context.Context) error {
	root, err := s.writeScripts()
	if err != nil {
		return err
	}
	theirs, err := s.openControl()
	if err != nil {
		return err
	}
	defer theirs.Close()
	var inputs []*os.File
	defer func() {
		for _, f := range inputs {
			_ = f.Close()
		}
	}()
	for _, data := range [][]byte{s.cfg.Seccomp, []byte(s.cfg.Passwd), []byte(s.cfg.Group)} {
		r, err := filledPipe(data)
		if err != nil {
			return err
		}
		inputs = append(inputs, r)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer readyR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		_ = readyW.Close()
		return err
	}
	if s.cfg.AgentDir != "" {
		if s.cfg.AgentDir, err = filepath.EvalSymlinks(s.cfg.AgentDir); err != nil {
			return fmt.Errorf("agent dir: %w", err)
		}
	}
	s.cmd = s.command(root, append([]*os.File{theirs}, inputs...), readyW, errW)
	err = engine.StartChild(s.cmd)
	_ = readyW.Close()
	_ = errW.Close()
	if err != nil {
		_ = errR.Close()
		return fmt.Errorf("exec %s: %w", s.cfg.Python, err)
	}
	tail := s.logStderr(errR)
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	if err := waitReady(ctx, readyR); err != nil {
		s.kill()
		<-s.done
		return fmt.Errorf("did not start: %w%s", err, tail())
	}
	return nil
}

// writeScripts writes the server's scripts into its directory, with the
// sandboxes' root mount point, and returns that.
func (s *Server) writeScripts() (root string, err error) {
	// The server's uid reads the scripts and mounts its root below dir.
	if err := os.Chmod(s.dir, 0o755); err != nil {
		return "", err
	}
	entries, err := scripts.ReadDir(".")
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		data, err := scripts.ReadFile(e.Name())
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(s.dir, e.Name()), data, 0o644); err != nil {
			return "", err
		}
	}
	root = filepath.Join(s.dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		return "", err
	}
	return root, nil
}

// openControl makes the control socket: s.ctl is sandboxd's end, and the
// server's is returned, for the caller to close once the server has it.
func (s *Server) openControl() (*os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "fork server control"), os.NewFile(uintptr(fds[1]), "fork server control")
	conn, err := net.FileConn(ours)
	_ = ours.Close()
	if err != nil {
		_ = theirs.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ctl, ok := conn.(*net.UnixConn)
	if !ok {
		_ = conn.Close()
		_ = theirs.Close()
		return nil, fmt.Errorf("control socket: %T is not a unix socket", conn)
	}
	s.ctl = ctl
	return theirs, nil
}

// command is the server's command: fds 3 and up are extra (the control
// socket, the seccomp filter, passwd, group), it says it is ready on
// ready and writes its diagnostics to stderr.
func (s *Server) command(root string, extra []*os.File, ready, stderr *os.File) *exec.Cmd {
	script := filepath.Join(s.dir, "codeexec_forkserver.py")
	args := []string{s.cfg.Python, "-I", script, root, s.cfg.AgentDir, s.cfg.Root,
		strings.Join(s.cfg.Etc, "\n"), strings.Join(s.cfg.Preload, ",")}
	args = append(args, mountArgs(s.cfg.Mounts)...)
	unshare := []string{s.unshare, "--user", "--map-root-user", "--mount"}
	if s.cfg.Root != "" {
		// The environment's interpreter runs with the environment's
		// loader and libraries: it is executed inside the tree, then
		// returns to its mount namespace's root to build its own
		// (bootScript).
		unshare = append(unshare, "--root="+s.cfg.Root)
		args = append([]string{s.cfg.Python, "-I", "-c", bootScript}, args[2:]...)
	}
	return &exec.Cmd{
		Path:       s.unshare,
		Args:       append(append(unshare, "--"), args...),
		Env:        envList(s.cfg.Env),
		Dir:        "/",
		Stdout:     ready,
		Stderr:     stderr,
		ExtraFiles: extra, // fds 3 (control), 4 (seccomp), 5 (passwd), 6 (group)
		SysProcAttr: &syscall.SysProcAttr{
			// The server runs as cfg.UID, without groups, and unshare(1)
			// makes its user and mount namespaces (mapping cfg.UID to uid 0)
			// and, in an environment, changes root into it: the namespace
			// is then cfg.UID's, not root's, as it would be were it made
			// here, and the kernel charges to a user namespace's owner what
			// is made in it and below it (queued signals, processes),
			// against that owner's host-wide limits. (A chroot made here
			// would forbid the unshare: the kernel refuses a new user
			// namespace to a chrooted process.)
			Credential: &syscall.Credential{Uid: uint32(s.cfg.UID), Gid: uint32(s.cfg.UID), Groups: []uint32{}},
		},
	}
}

// logStderr logs what the server writes to stderr and returns a function
// that gives its last lines, for an error message.
func (s *Server) logStderr(r *os.File) func() string {
	var mu sync.Mutex
	var last []string
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			line := sc.Text()
			s.cfg.Logger.Warn("fork server stderr", "line", line)
			mu.Lock()
			last = append(last, line)
			if len(last) > 5 {
				last = last[1:]
			}
			mu.Unlock()
		}
	}()
	return func() string {
		select {
		case <-read:
		case <-time.After(time.Second):
		}
		mu.Lock()
		defer mu.Unlock()
		if len(last) == 0 {
			return ""
		}
		return ": " + strings.Join(last, "; ")
	}
}

// waitReady waits for the server's "ready" line.
func waitReady(ctx context.Context, r *os.File) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = r.SetReadDeadline(dl)
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if line == "ready\n" {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return errors.New("it exited")
	}
	return err
}

// Done is closed once the server has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// PID is the server's host PID.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Config returns what the server was made for.
func (s *Server) Config() Config { return s.cfg }

// Close stops the server. Sandboxes it started run on.
func (s *Server) Close() error {
	_ = s.ctl.Close() // the server exits when its end reads EOF
	select {
	case <-s.done:
	case <-time.After(2 * time.Second):
		s.kill()
		<-s.done
	}
	return s.tmp.Remove()
}

func (s *Server) kill() {
	_ = s.cmd.Process.Kill()
}

// envList turns env into exec.Cmd.Env: never nil, which would mean
// sandboxd's environment.
func envList(env map[string]string) []string {
	out := []string{}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// filledPipe returns the read end of a pipe that holds data and EOF.
// data must fit the pipe's buffer (64 KiB).
func filledPipe(data []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(data)
	_ = w.Close()
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}

// mountArgs are the server's arguments after the agent directory: host
// path, sandbox path and "ro" or "rw" for each mount.
func mountArgs(mounts []engine.Mount) []string {
	var out []string
	for _, m := range mounts {
		mode := "ro"
		if m.Writable {
			mode = "rw"
		}
		out = append(out, m.Host, m.Sandbox, mode)
	}
	return out
}
