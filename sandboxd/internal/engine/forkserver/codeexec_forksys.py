"""System calls the fork server needs that Python 3.11 lacks, through ctypes.

clone with flags, unshare, mount and pivot_root, capabilities, seccomp and
the loopback interface. Every wrapper raises OSError with what it tried.
Nothing here allocates per call beyond the arguments, so that the server's
loop, which every sandbox copies, stays small.
"""

import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)

# Syscall numbers glibc 2.36 has no wrapper for (close_range and
# move_mount have the same number on every architecture).
_NR = {
    "x86_64": {"clone": 56, "pivot_root": 155, "close_range": 436, "move_mount": 429},
    "aarch64": {"clone": 220, "pivot_root": 41, "close_range": 436, "move_mount": 429},
}.get(os.uname().machine)
if _NR is None:
    raise ImportError("the fork server has no syscall table for %s" % os.uname().machine)

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_PARENT = 0x00008000
SIGCHLD = 17

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_SILENT = 32768
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NAME = 15
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2

_long = ctypes.c_long
_syscall = _libc.syscall
_syscall.restype = _long
_prctl = _libc.prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_prctl_name = _libc["prctl"]  # a second prototype: the name is a string
_prctl_name.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_mount = _libc.mount
_mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_umount2 = _libc.umount2
_umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_unshare = _libc.unshare
_unshare.argtypes = [ctypes.c_int]
_sethostname = _libc.sethostname
_sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
_capset = _libc.capset
_socket = _libc.socket
_ioctl = _libc.ioctl


def _check(rc, what):
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, "%s: %s" % (what, os.strerror(err)))
    return rc


def clone(flags):
    """fork(2) with clone flags: 0 in the child, its PID in the caller.

    The child continues in this interpreter without Python's after-fork
    hooks (os.fork cannot take flags), so it must stay single-threaded and
    only make system calls until it forks properly or exits.
    """
    return _check(_syscall(_long(_NR["clone"]), _long(flags), _long(0), _long(0), _long(0), _long(0)), "clone")


def unshare(flags):
    _check(_unshare(flags), "unshare(%#x)" % flags)


def mount(source, target, fstype, flags, data=None):
    _check(_mount(source, target, fstype, flags, data), "mount %s on %s" % (source or fstype, target))


def umount(target, flags=MNT_DETACH):
    _check(_umount2(target, flags), "umount %s" % target)


def pivot_root(new_root, put_old):
    _check(_syscall(_long(_NR["pivot_root"]), ctypes.c_char_p(new_root), ctypes.c_char_p(put_old)), "pivot_root")


def move_mount(fd, target):
    """Attaches the detached mount tree fd (open_tree(OPEN_TREE_CLONE)) at target."""
    _check(_syscall(_long(_NR["move_mount"]), _long(fd), ctypes.c_char_p(b""), _long(-100), ctypes.c_char_p(target),
                    _long(4)), "move_mount to %s" % target)  # AT_FDCWD, MOVE_MOUNT_F_EMPTY_PATH


def close_range(first):
    """Closes every descriptor from first up."""
    _check(_syscall(_long(_NR["close_range"]), _long(first), _long(0xFFFFFFFF), _long(0)), "close_range")


def prctl(option, arg=0):
    return _check(_prctl(option, arg, 0, 0, 0), "prctl(%d)" % option)


def set_name(name):
    """Sets the thread's name (comm, at most 15 bytes), as ps shows it."""
    _prctl_name(PR_SET_NAME, name[:15], 0, 0, 0)


def sethostname(name):
    _check(_sethostname(name, len(name)), "sethostname")


# Flags statvfs reports, as mount(2) flags: a remount must repeat the ones
# the kernel locked when the mount was copied from a more privileged
# namespace (bwrap reads them from mountinfo for the same reason).
_ST_TO_MS = ((1, MS_RDONLY), (2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC),
             (1024, MS_NOATIME), (2048, MS_NODIRATIME), (4096, MS_RELATIME))


def bind(source, target, readonly=True, devices=False):
    """Binds source at target (recursively) and makes it nosuid, nodev
    unless devices, and read-only when asked, as bwrap --ro-bind does."""
    mount(source, target, None, MS_BIND | MS_REC | MS_SILENT)
    restrict(target, readonly, devices)


def restrict(target, readonly=True, devices=False):
    """Remounts the mount at target nosuid, nodev unless devices, and
    read-only when asked."""
    st = os.statvfs(target).f_flag
    have = 0
    for st_flag, ms_flag in _ST_TO_MS:
        if st & st_flag:
            have |= ms_flag
    want = have | MS_NOSUID | (0 if devices else MS_NODEV) | (MS_RDONLY if readonly else 0)
    if want != have:
        mount(None, target, None, MS_BIND | MS_REMOUNT | MS_SILENT | want)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_cap_header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
_cap_none = (_CapData * 2)()
with open("/proc/sys/kernel/cap_last_cap", "rb") as _f:
    _CAPS = tuple(range(int(_f.read()) + 1))


def drop_bounding_set():
    """Empties the bounding set: no execve can give a capability back."""
    for cap in _CAPS:
        if _prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0:
            _check(-1, "drop capability %d from the bounding set" % cap)


def drop_capabilities():
    """Clears the ambient, inheritable, permitted and effective sets."""
    _check(_prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    _check(_capset(ctypes.byref(_cap_header), _cap_none), "capset")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class Seccomp:
    """A BPF filter (struct sock_filter[], as bwrap --seccomp reads it),
    held in memory the children copy."""

    def __init__(self, program):
        if len(program) % 8:
            raise ValueError("seccomp program is %d bytes, not whole instructions" % len(program))
        self._buf = ctypes.create_string_buffer(program, len(program))
        self._prog = _SockFprog(len(program) // 8, ctypes.addressof(self._buf))

    def install(self):
        """Installs the filter; no_new_privs must be set."""
        if self._prog.len:
            _check(_prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(self._prog), 0, 0), "seccomp")


class _IfReq(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 16), ("flags", ctypes.c_short), ("pad", ctypes.c_char * 22)]


def loopback_up():
    """Brings lo up in the current network namespace, as bwrap does; the
    kernel gives it 127.0.0.1 and ::1."""
    fd = _check(_socket(2, 2 | 0o2000000, 0), "socket")  # AF_INET, SOCK_DGRAM | SOCK_CLOEXEC
    try:
        req = _IfReq(b"lo")
        _check(_ioctl(fd, 0x8913, ctypes.byref(req)), "SIOCGIFFLAGS lo")  # get
        req.flags |= 1  # IFF_UP
        _check(_ioctl(fd, 0x8914, ctypes.byref(req)), "SIOCSIFFLAGS lo")  # set
    finally:
        os.close(fd)


def write_file(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def set_id_maps(inside, outside):
    """Maps uid and gid `inside` of the user namespace just unshared to
    `outside`, the caller's ids in the parent, which an unprivileged
    process may do for itself once setgroups is denied."""
    line = b"%d %d 1" % (inside, outside)
    write_file(b"/proc/self/uid_map", line)
    write_file(b"/proc/self/setgroups", b"deny")
    write_file(b"/proc/self/gid_map", line)
