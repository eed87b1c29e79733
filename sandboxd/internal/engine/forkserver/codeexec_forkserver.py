"""codeexec fork server: starts bwrap-equivalent sandboxes by forking.

sandboxd runs `python3 -I codeexec_forkserver.py DIR AGENT_DIR ...` as the
sandbox uid through unshare(1), which makes the server's user and mount
namespaces (owned by that uid, which is uid 0 in them; forkserver.go,
command). The server builds a root like a sandbox's in DIR, imports the agent from
/opt/codeexec and then only forks: it never runs user code. Each request
on fd 3 (a SOCK_SEQPACKET socket) carries the sandbox's stdio pipes, a
report socket and its cgroups' files; what happens to it:

  monitor  cloned with CLONE_PARENT, so that it is sandboxd's child and
           outlives this server; joins the sandbox's cgroups, sets its
           rlimits, clones init, reports both PIDs with a pidfd of init
           (sandboxd kills the sandbox through it) and waits for init
           (bwrap's outer process, which the shim made in the same limits).
  init     cloned into new PID, mount, network, IPC and UTS namespaces;
           enters a cgroup namespace, completes the sandbox's root
           (codeexec_forkroot.py), enters nested user namespaces (uid
           65534, no further user namespaces), forks the sandbox and reaps
           (bwrap's PID 1).
  sandbox  PID 2: drops every capability, installs the seccomp filter and
           runs the agent (or a `-c` script) in this interpreter, or execs
           any other command.

See forkserver.go for the request format and the isolation argument.
"""

import _socket
import fcntl
import gc
import os
import resource
import select
import signal
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _here)
import codeexec_forkheap as heap  # noqa: E402
import codeexec_forkroot as root  # noqa: E402
import codeexec_forkrun as run  # noqa: E402
import codeexec_forksys as z  # noqa: E402
from codeexec_forkreq import Request, fds_of  # noqa: E402
sys.path.remove(_here)

CTL_FD, SECCOMP_FD, PASSWD_FD, GROUP_FD = 3, 4, 5, 6
MAX_REQUEST = 1 << 20
SANDBOX_ID = 65534
# /proc/sys/user in a sandbox's outer user namespace: one user namespace
# (the inner one), and nothing else that the kernel counts per user.
USER_NS_LIMITS = ((b"max_user_namespaces", b"1"),) + tuple(
    (b"max_" + n, b"0") for n in (
        b"inotify_instances", b"inotify_watches", b"fanotify_groups", b"fanotify_marks",
        b"cgroup_namespaces", b"ipc_namespaces", b"mnt_namespaces", b"net_namespaces",
        b"pid_namespaces", b"time_namespaces", b"uts_namespaces"))
NAMESPACES = z.CLONE_NEWPID | z.CLONE_NEWNS | z.CLONE_NEWNET | z.CLONE_NEWIPC | z.CLONE_NEWUTS | z.SIGCHLD


def _read_all(fd):
    chunks = []
    while True:
        b = os.read(fd, 1 << 16)
        if not b:
            os.close(fd)
            return b"".join(chunks)
        chunks.append(b)


class Server:
    """The server's state, which every sandbox inherits: the agent's entry
    module, sandboxd's PID and the seccomp filter."""

    def __init__(self, agent):
        self.agent = agent  # or None
        self.parent = os.getppid()
        self.seccomp = z.Seccomp(_read_all(SECCOMP_FD))
        self.held = {}  # a spare's monitor PID -> the server's end of its socket
        self.filler = []  # heap.fill_pools()'s objects, kept while it forks

    def serve(self, ctl):
        """Forks a monitor per request. Returns only in a monitor."""
        self.poller = select.poll()
        self.poller.register(CTL_FD, select.POLLIN)
        while True:
            for fd, _ in self.poller.poll():
                if fd != CTL_FD:  # a spare is gone: its socket hung up
                    self.poller.unregister(fd)
                    for pid, ours in list(self.held.items()):
                        if ours == fd:
                            del self.held[pid]
                    os.close(fd)
                    continue
                sandbox = self._request(ctl)
                if sandbox is not None:
                    return sandbox

    def _request(self, ctl):
        """Serves one request: a Sandbox in the monitor, else None."""
        try:
            data, anc, flags, _ = ctl.recvmsg(MAX_REQUEST, _socket.CMSG_SPACE(16 * 4))
        except InterruptedError:
            return None
        if not data and not anc:
            os._exit(0)  # sandboxd closed its end
        fds = fds_of(anc)
        try:
            if flags & (_socket.MSG_TRUNC | _socket.MSG_CTRUNC):
                raise ValueError("request truncated")
            if data.startswith(b"go1\0"):
                self._release(data, fds)
            else:
                req = Request(data, fds)
                ours = -1
                if req.hold:
                    a, b = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
                    ours, req.held = a.detach(), b.detach()
                try:
                    pid = z.clone(z.CLONE_PARENT | z.SIGCHLD)
                except OSError:
                    if req.hold:
                        os.close(ours)
                        os.close(req.held)
                    raise
                if pid == 0:
                    ctl.detach()  # the monitor closes the number; the object must never close it again
                    return Sandbox(self, req)
                if req.hold:
                    os.close(req.held)
                    self.held[pid] = ours
                    self.poller.register(ours, select.POLLIN)
        except Exception as exc:  # noqa: BLE001 - one bad request must not end the server
            report = fds[0] if data.startswith(b"hold1\0") else fds[3] if len(fds) > 3 else -1
            if report >= 0:
                try:
                    os.write(report, b"error: %s\n" % str(exc).encode())
                except OSError:
                    pass
        for fd in fds:
            os.close(fd)
        return None

    def _release(self, data, fds):
        """Passes a release on to the spare it names (its monitor's PID),
        and says on the report pipe (the last descriptor) whether it could."""
        report, stdio = fds[-1], fds[:-1]
        ours = self.held.pop(int(data.split(b"\0")[1]), -1)
        if ours < 0:
            raise ValueError("no such spare")
        self.poller.unregister(ours)
        sock = _socket.socket(fileno=ours)
        try:
            sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                                   b"".join(fd.to_bytes(4, sys.byteorder) for fd in stdio))])
        except OSError as exc:
            raise ValueError("the spare is gone: %s" % exc) from exc
        finally:
            sock.close()
        os.write(report, b"ok\n")


class Sandbox:
    def __init__(self, server, req):
        self.server = server
        self.req = req

    def monitor(self):
        """The monitor: returns only in the sandbox's PID 2, with what to run."""
        req = self.req
        try:
            z.prctl(z.PR_SET_PDEATHSIG, signal.SIGKILL)
            z.set_name(b"codeexec-sbx")
            if os.getppid() != self.server.parent:
                os._exit(1)  # sandboxd died before the death signal was set
            # Into the sandbox's cgroups and limits before anything else,
            # so that all it starts is born inside them.
            for fd in req.cgroups:
                os.write(fd, b"0")  # a thread that moves itself (cgroup.Group.SelfJoinFiles)
            for res, value in req.rlimits:
                resource.setrlimit(res, (value, value))
            self.alive = os.pipe()  # init reads EOF from it once the monitor is gone
            pid = z.clone(NAMESPACES)
        except BaseException as exc:  # noqa: BLE001
            run.fail("monitor", exc, req.err)
        if pid == 0:
            return self.init()
        try:
            # Killing init ends the whole PID namespace before init's own
            # end, and this process's, is reported: after that, nothing of
            # the sandbox is left. A pidfd names init even once it is gone.
            pidfd = os.pidfd_open(pid)
            sock = _socket.socket(fileno=req.report)
            sock.sendmsg([b"%d %d\n" % (os.getpid(), pid)],
                         [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, pidfd.to_bytes(4, sys.byteorder))])
            sock.close()
            os.close(pidfd)
        except BaseException as exc:  # noqa: BLE001 - sandboxd does not know the sandbox: end it
            os.kill(pid, signal.SIGKILL)
            run.fail("monitor", exc, req.err)
        keep = self.alive[1]
        os.closerange(0, keep)
        z.close_range(keep + 1)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        try:
            z.drop_capabilities()
        except OSError:
            pass
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                os._exit(run.exit_code(status))
            except InterruptedError:
                continue

    def init(self):
        """PID 1 of the sandbox: sets it up, forks PID 2, then reaps."""
        req = self.req
        try:
            z.prctl(z.PR_SET_PDEATHSIG, signal.SIGKILL)
            r, w = self.alive
            os.close(w)
            os.set_blocking(r, False)
            try:
                if os.read(r, 1) == b"":
                    os._exit(1)  # the monitor died before the death signal was set
            except BlockingIOError:
                pass
            os.close(r)
            z.unshare(z.CLONE_NEWCGROUP)  # rooted at the sandbox's cgroup
            for i, fd in enumerate(req.stdio):
                os.dup2(fd, i)
            tree, req.held = _keep(req.tree, req.held)
        except BaseException as exc:  # noqa: BLE001
            run.fail("sandbox set-up", exc, req.err)
        try:
            z.set_name(b"codeexec-init")
            z.sethostname(b"sandbox")
            z.loopback_up()
            root.enter_sandbox_root(req.agent, tree, req.tmp, req.workspace)
            if tree >= 0:
                os.close(tree)
            # Two user namespaces, as bwrap --disable-userns makes them: the
            # outer one allows one user namespace below it, which the inner
            # one, where the sandbox runs as 65534, uses up.
            z.unshare(z.CLONE_NEWUSER)
            z.set_id_maps(0, 0)
            # The kernel counts what a user makes in every user namespace
            # up the chain: in the outer one the sandbox may make nothing
            # it counts (seccomp refuses the notify and queue calls too)
            # but the inner namespace.
            for name, value in USER_NS_LIMITS:
                try:
                    z.write_file(b"/proc/sys/user/" + name, value)
                except FileNotFoundError:
                    pass  # a kernel without that kind of object
            z.unshare(z.CLONE_NEWUSER)
            z.set_id_maps(SANDBOX_ID, 0)
            try:
                z.unshare(z.CLONE_NEWUSER)
            except OSError:
                pass
            else:
                raise RuntimeError("creating user namespaces was not disabled")
            # Limits the kernel charges up the chain too, but checks at each
            # level against what the namespace's creator had: set now, they
            # bound this sandbox alone, and the namespaces above keep the
            # server's, which all sandboxes share.
            for res, value in req.ns_rlimits:
                resource.setrlimit(res, (value, value))
            z.drop_bounding_set()
            os.chdir(b"/workspace")
            os.setsid()
            # A spare forks PID 2 before it waits: the release then wakes a
            # process that is already there, and the fork (a copy of this
            # interpreter's page tables, then its first writes) is paid
            # while the spare waits, not by the session that takes it.
            pid = os.fork()
        except BaseException as exc:  # noqa: BLE001
            run.fail("sandbox set-up", exc)
        if pid == 0:
            return self.sandbox()
        try:
            z.close_range(0)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)  # init: ignored from inside
            z.drop_capabilities()
            self.server.seccomp.install()
        except BaseException:  # noqa: BLE001
            os._exit(1)
        code = 1
        while True:
            try:
                p, status = os.wait()
            except InterruptedError:
                continue
            except ChildProcessError:
                os._exit(code)
            if p == pid:
                code = run.exit_code(status)

    def _wait_release(self):
        """A spare's PID 2: waits until the spare is released (or the server
        is gone, and with it the spare) and takes its command and stdio."""
        req = self.req
        sock = _socket.socket(fileno=req.held)
        while True:
            try:
                data, anc, _, _ = sock.recvmsg(MAX_REQUEST, _socket.CMSG_SPACE(3 * 4))
                break
            except InterruptedError:
                continue
        fds = fds_of(anc)
        sock.close()
        if not data:
            os._exit(0)
        req.release(data, fds)
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
            os.close(fd)

    def sandbox(self):
        """PID 2: the last steps before the sandbox's own code runs.
        Returns what to run."""
        req = self.req
        try:
            z.prctl(z.PR_SET_PDEATHSIG, signal.SIGKILL)
            z.drop_capabilities()
            if req.hold:
                self._wait_release()
        except BaseException as exc:  # noqa: BLE001
            run.fail("sandbox set-up", exc)
        try:
            # Dumpable (ptrace-able by its own uid, like any process it
            # starts) only once it is the session's.
            z.prctl(z.PR_SET_DUMPABLE, 1)
            z.set_name(os.path.basename(req.argv[0]))
            # random was reseeded by os.fork (random registers that), so
            # each sandbox draws its own stream; numpy's global generator,
            # when the server preloaded it, is reseeded here.
            _reseed()
            # The environment is the server's when the sandbox runs in this interpreter (Go's
            # forkMode); another is given to the command executed.
            argv = [os.fsdecode(a) for a in req.argv]
            if req.mode == b"exec":
                env = {os.fsdecode(req.env[k]): os.fsdecode(req.env[k + 1]) for k in range(0, len(req.env), 2)}
                for sig in (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ):
                    signal.signal(sig, signal.SIG_DFL)
            else:
                signal.signal(signal.SIGINT, signal.default_int_handler)
            self.server.seccomp.install()
        except BaseException as exc:  # noqa: BLE001
            run.fail("sandbox", exc)
        if req.mode == b"exec":
            return lambda: run.exec_command(argv, env)
        if req.mode == b"agent":
            return lambda: run.run_agent(self.server.agent, argv)
        return lambda: run.run_script(argv)


def _reseed():
    """Gives a preloaded numpy.random a stream of this sandbox's own."""
    nprandom = sys.modules.get("numpy.random")
    if nprandom is not None:
        nprandom.seed()


def _keep(*fds):
    """Moves the descriptors of fds that are open (not -1) to 3, 4, ...,
    closes every other from 3 up, and returns their new numbers."""
    # First above the numbers they move to, so that none is overwritten
    # (and below any RLIMIT_NOFILE a sandbox could have).
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3 + len(fds)) if fd >= 0 else -1 for fd in fds]
    out, n = [], 3
    for fd in high:
        if fd < 0:
            out.append(-1)
            continue
        os.dup2(fd, n)
        out.append(n)
        n += 1
    z.close_range(n)
    return out


def _preload(names):
    """Imports an environment's heavy modules once, for every sandbox.
    They are the environment's own libraries, never user code."""
    for name in names:
        try:
            __import__(name)
        except Exception as exc:  # noqa: BLE001 - a sandbox imports it itself, and gets the error then
            os.write(2, b"preloading %s failed: %s\n" % (name.encode(), str(exc).encode()))


def _start():
    root_dir, agent_dir, env_root = (os.fsencode(a) for a in sys.argv[1:4])
    etc = [os.fsencode(p) for p in sys.argv[4].split("\n") if p]
    preload = [m for m in sys.argv[5].split(",") if m]
    z.prctl(z.PR_SET_NO_NEW_PRIVS, 1)
    rest = [os.fsencode(a) for a in sys.argv[6:]]
    mounts = [(rest[i], rest[i + 1], rest[i + 2] == b"rw") for i in range(0, len(rest) - 2, 3)]
    root.build_server_root(root_dir, agent_dir, _read_all(PASSWD_FD), _read_all(GROUP_FD), env_root, etc, mounts)
    agent = None
    if agent_dir:
        sys.path.insert(0, root.AGENT_MOUNT.decode())
        try:
            import agent  # the entry; it imports the rest when its main runs,
            import codeexec_session  # noqa: F401 - so import that here, once for all
            import codeexec_checkpoint  # and what a session's first checkpoint imports

            for name in codeexec_checkpoint.SNAPSHOT_IMPORTS:
                __import__(name)
        finally:
            sys.path.remove(root.AGENT_MOUNT.decode())
        # The entry is __main__ in a sandbox, never importable as "agent":
        # user code may have a module of that name in /workspace.
        del sys.modules["agent"]
    import random  # noqa: F401 - common in user code; every sandbox reseeds it
    _preload(preload)
    server = Server(agent)
    ctl = _socket.socket(fileno=CTL_FD)
    z.set_name(b"codeexec-zygote")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a ^C at sandboxd's terminal is sandboxd's to handle
    # What the server made so far becomes immortal and leaves the
    # collector's reach, and the free slots among its objects are taken,
    # so that a sandbox writes to as few of the pages it shares with the
    # server as it can (codeexec_forkheap.py says how each helps).
    gc.collect()
    heap.immortalize()
    server.filler = heap.fill_pools()
    gc.freeze()
    os.write(1, b"ready\n")
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    os.dup2(null, 1)
    os.close(null)
    return server.serve(ctl)


if __name__ == "__main__":
    try:
        _sandbox = _start()
    except BaseException as _exc:  # noqa: BLE001
        os.write(2, b"codeexec fork server: %s\n" % str(_exc).encode())
        os._exit(1)
    _run = _sandbox.monitor()
    del _sandbox
    _run()
