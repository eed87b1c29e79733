"""The fork server's root and the sandboxes' roots.

The mounts are the ones bwrapArgs (package bwrap, args.go) asks bwrap for,
in the same order and with the same flags: a read-only tmpfs root with
/usr, the dynamic linker cache, passwd and group, the agent at
/opt/codeexec, a fresh /proc, a /dev tmpfs with six device nodes and its
own devpts, and sized noexec tmpfs at /tmp, /dev/shm and /workspace.

What every sandbox shares is built once, read-only, as a template at
/newroot in the server's root; what differs (proc, dev, the tmpfs, another
agent directory) each sandbox's init mounts into its own copy of the
mount namespace before it pivots into the template and detaches the rest.
"""

import os

import codeexec_forksys as z

AGENT_MOUNT = b"/opt/codeexec"
DEVNODES = (b"null", b"zero", b"full", b"random", b"urandom", b"tty")
TMPFS = z.MS_NOSUID | z.MS_NODEV | z.MS_SILENT
NEWROOT = b"/newroot"


def _bind_ro(src, dst):
    """Binds the file or directory src read-only at dst, making its mount
    point (and the directories above it)."""
    os.makedirs(os.path.dirname(dst), 0o755, exist_ok=True)
    if os.path.isdir(src):
        os.makedirs(dst, 0o755, exist_ok=True)
    elif not os.path.exists(dst):
        os.mknod(dst, 0o444)
    z.bind(src, dst)


def build_server_root(root, agent_dir, passwd, group, env_root=b"", etc=(), mounts=()):
    """Makes root the server's own root and pivots into it: /usr (an
    environment's, or the host's with the /etc pieces in etc) and the
    agent, /dev's nodes to bind from, the host's /proc (a new /proc may
    only be mounted where a full one is visible), a small /tmp of its own
    (for what its preloaded modules cache) and the template, with the
    operator's mounts, [(host, sandbox path, writable)], in it. Nothing
    else of the host stays in the server's mount namespace."""
    z.mount(None, b"/", None, z.MS_REC | z.MS_PRIVATE)
    z.mount(b"tmpfs", root, b"tmpfs", TMPFS, b"mode=0755")
    for d in (b"usr", b"etc", b"dev", b"proc", b"tmp", NEWROOT[1:], b".old", AGENT_MOUNT[1:]):
        os.makedirs(root + b"/" + d, 0o755)
    if env_root:
        z.bind(env_root + b"/usr", root + b"/usr")
        z.bind(env_root + b"/etc", root + b"/etc")
    else:
        z.bind(b"/usr", root + b"/usr")
        os.mknod(root + b"/etc/ld.so.cache", 0o444)
        z.bind(b"/etc/ld.so.cache", root + b"/etc/ld.so.cache")
        for p in etc:
            _bind_ro(p, root + p)
    z.mount(b"tmpfs", root + b"/tmp", b"tmpfs", TMPFS, b"mode=1777,size=16m")
    if agent_dir:
        z.bind(agent_dir, root + AGENT_MOUNT)
    z.mount(b"tmpfs", root + b"/dev", b"tmpfs", TMPFS, b"mode=0755")
    for n in DEVNODES:
        os.mknod(root + b"/dev/" + n)
        z.bind(b"/dev/" + n, root + b"/dev/" + n, readonly=False, devices=True)
    z.mount(b"/proc", root + b"/proc", None, z.MS_BIND | z.MS_REC | z.MS_SILENT)

    new = root + NEWROOT
    for name in (b"lib", b"lib64", b"bin", b"sbin"):
        os.symlink(b"usr/" + name, root + b"/" + name)
    if env_root:
        # The environment's tree is the sandbox's root, with the mount
        # points every sandbox needs, as bwrap --ro-bind ROOT / has it.
        z.mount(env_root, new, None, z.MS_BIND | z.MS_SILENT)
    else:
        _host_template(root, new, passwd, group, etc)
    if agent_dir:
        z.mount(root + AGENT_MOUNT, new + AGENT_MOUNT, None, z.MS_BIND | z.MS_REC | z.MS_SILENT)
    if env_root and mounts:
        # An environment's tree is read-only: its empty /mnt gets a small
        # tmpfs in which the mount points can be made.
        z.mount(b"tmpfs", new + b"/mnt", b"tmpfs", TMPFS, b"mode=0755,size=64k")
    for host, path, writable in mounts:
        # As bwrap --ro-bind / --bind: nosuid, nodev, read-only unless
        # asked for.
        os.makedirs(new + path, 0o755, exist_ok=True)
        z.bind(host, new + path, readonly=not writable)
    z.mount(None, new, None, z.MS_BIND | z.MS_REMOUNT | z.MS_RDONLY | TMPFS)
    z.pivot_root(root, root + b"/.old")
    os.chdir(b"/")
    z.umount(b"/.old")
    z.mount(None, b"/", None, z.MS_BIND | z.MS_REMOUNT | z.MS_RDONLY | TMPFS)


def _host_template(root, new, passwd, group, etc):
    """The template of a sandbox on the host's /usr: a tmpfs with /usr,
    the linker's cache, the /etc pieces and synthetic passwd and group."""
    z.mount(b"tmpfs", new, b"tmpfs", TMPFS, b"mode=0755")
    for d in (b"usr", b"etc", b"proc", b"dev", b"tmp", b"workspace", AGENT_MOUNT[1:]):
        os.makedirs(new + b"/" + d, 0o755)
    z.mount(root + b"/usr", new + b"/usr", None, z.MS_BIND | z.MS_REC | z.MS_SILENT)  # read-only already
    for name in (b"lib", b"lib64", b"bin", b"sbin"):
        os.symlink(b"usr/" + name, new + b"/" + name)
    for name, data in ((b"passwd", passwd), (b"group", group)):
        fd = os.open(new + b"/etc/" + name, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        os.write(fd, data)
        os.close(fd)
    os.mknod(new + b"/etc/ld.so.cache", 0o444)
    z.mount(root + b"/etc/ld.so.cache", new + b"/etc/ld.so.cache", None, z.MS_BIND | z.MS_SILENT)
    for p in etc:
        _bind_ro(root + p, new + p)


def enter_sandbox_root(agent, tree, tmp, workspace):
    """Completes this mount namespace's copy of the template for one
    sandbox and makes it the root. agent is b"server" to keep the server's
    agent directory, b"tree" to mount tree (a detached mount, from
    open_tree) there instead, or b"" for an empty directory there."""
    new = NEWROOT
    z.mount(b"proc", new + b"/proc", b"proc", z.MS_NOSUID | z.MS_NOEXEC | z.MS_NODEV | z.MS_SILENT)
    for d in (b"sys", b"sysrq-trigger", b"irq", b"bus"):
        p = new + b"/proc/" + d
        if os.access(p, os.W_OK):  # bwrap covers these if they are writable
            z.bind(p, p)
    dev = new + b"/dev"
    z.mount(b"tmpfs", dev, b"tmpfs", TMPFS, b"mode=0755")
    for n in DEVNODES:
        os.mknod(dev + b"/" + n)
        z.mount(b"/dev/" + n, dev + b"/" + n, None, z.MS_BIND | z.MS_SILENT)
    for i, name in enumerate((b"stdin", b"stdout", b"stderr")):
        os.symlink(b"/proc/self/fd/%d" % i, dev + b"/" + name)
    os.symlink(b"/proc/self/fd", dev + b"/fd")
    os.symlink(b"/proc/kcore", dev + b"/core")
    os.mkdir(dev + b"/shm", 0o755)
    os.mkdir(dev + b"/pts", 0o755)
    z.mount(b"devpts", dev + b"/pts", b"devpts", z.MS_NOSUID | z.MS_NOEXEC | z.MS_SILENT,
            b"newinstance,ptmxmode=0666,mode=620")
    os.symlink(b"pts/ptmx", dev + b"/ptmx")
    target = new + AGENT_MOUNT
    if agent != b"server" and os.path.ismount(target):
        z.umount(target)
    if agent == b"tree":
        z.move_mount(tree, target)
        z.restrict(target)
    for path, size in ((b"/tmp", tmp), (b"/dev/shm", tmp), (b"/workspace", workspace)):
        # noexec, as a container runtime mounts them (and bwrap's shim).
        z.mount(b"tmpfs", new + path, b"tmpfs", TMPFS | z.MS_NOEXEC, b"mode=0755,size=%d" % size if size else b"mode=0755")
    os.chdir(new)
    z.pivot_root(b".", b".")
    z.umount(b".")
    os.chdir(b"/")
