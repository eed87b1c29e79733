package bwrap

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
)

// sandboxUID and sandboxGID are the ids the sandboxed code runs as inside
// the sandbox: nobody/nogroup. On the host (when sandboxd is root) it runs
// as Config.HostUID, which owns its user namespaces.
const (
	sandboxUID = 65534
	sandboxGID = 65534
)

// prlimitPath is util-linux's prlimit inside the sandbox (the host's /usr):
// bwrap's sandboxes set their NsRlimits with it, inside their user
// namespaces (nsRlimits).
const prlimitPath = "/usr/bin/prlimit"

// In an environment (rootFS.root), the sandbox's root file system is the
// environment's tree, read-only, with its own /etc. Without one, it is an
// empty, read-only tmpfs with only these parts of the host: /usr
// (read-only), the dynamic linker cache and the /etc pieces of
// engine.HostEtc, and the agent directory; /etc/passwd and /etc/group are
// then synthetic so that getpass.getuser() and pwd work. Either way
// nothing else of the host is visible: not /root, /home, /work, /var,
// /sys, the state dir, /etc/shadow, ssl/private or its time zone.
const (
	passwdData = "nobody:x:65534:65534:nobody:/workspace:/usr/sbin/nologin\n" //nolint:gosec // a passwd line for nobody; "x" is no password
	groupData  = "nobody:x:65534:\n"
)

// Descriptors bwrap reads from (exec.Cmd.ExtraFiles start at 3): the
// synthetic files, and --args with the options that differ between
// sandboxes (bwrapArgs).
const (
	passwdFD  = 3
	groupFD   = 4
	argsFD    = 5
	seccompFD = 7 // 6 is the gate, which the shim closes before bwrap starts
)

// bwrapArgs returns bwrap's arguments for spec in two parts: argv, the
// command line, which ends with the command run inside the sandbox, and
// data, the NUL-separated options bwrap reads from --args (argsFD) at the
// point where --args stands. argv holds only what is the same for every
// sandbox of one sandboxd (the isolation flags, the command); everything
// else (the agent mount, tmpfs sizes, the environment) is in data. That
// split lets a launcher be started before its sandbox is asked for
// (launcher.go): it needs only argv.
//
// Notes on bubblewrap 0.8.0:
//   - --unshare-all unshares user, pid, net, ipc, uts, cgroup and mount
//     namespaces; --unshare-user makes the user namespace mandatory rather
//     than "try" so --uid/--gid always apply. --disable-userns (new in
//     0.8) stops the code from creating nested user namespaces, where it
//     would regain capabilities and reach much more kernel surface.
//   - tmpfs mounts (--tmpfs, the root, /dev) get nosuid,nodev from bwrap
//     itself. bwrap has no option for noexec, so when sandboxd is root the
//     shim mounts /tmp, /dev/shm and /workspace noexec under scratch, in a
//     mount namespace of its own, and bwrap binds them (noexecShim): a
//     bind keeps the flags of its source, locked, since it crosses into a
//     less privileged user namespace. Otherwise (scratch is "") they are
//     bwrap's tmpfs, executable.
//   - --remount-ro / must come after every mount under / (the synthetic
//     files are created on the root tmpfs; data's mounts are parsed where
//     --args stands, before it).
//   - The command cannot be in data: bwrap 0.8 ignores what is left of an
//     --args list after its options.
//   - The environment is --clearenv plus one --setenv per variable, in
//     data, so secrets never show up in a host process listing, and the
//     host-side shell never sees (or drops) any variable. bwrap always sets
//     PWD after --chdir, so unless spec.Env sets PWD to the working
//     directory, the command is started through /usr/bin/env to make the
//     environment exactly spec.Env.
//
// workDir is the sandbox's working directory, a tmpfs.
const workDir = "/workspace"

func bwrapArgs(fs rootFS, spec engine.Spec, seccomp bool, scratch string) (argv []string, data []byte) {
	argv = []string{
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--die-with-parent", "--new-session",
		"--cap-drop", "ALL",
		"--uid", strconv.Itoa(sandboxUID), "--gid", strconv.Itoa(sandboxGID),
		"--hostname", "sandbox",
	}
	argv = append(argv, fs.args()...)
	argv = append(argv, "--proc", "/proc", "--dev", "/dev")
	if seccomp {
		argv = append(argv, "--seccomp", strconv.Itoa(seccompFD))
	}
	argv = append(argv,
		"--args", strconv.Itoa(argsFD),
		"--remount-ro", "/",
		"--")
	if ns := nsRlimits(spec.Limits); len(ns) > 0 {
		argv = append(argv, prlimitPath)
		for _, l := range ns {
			argv = append(argv, fmt.Sprintf("--%s=%d", prlimitName[l.resource], l.value))
		}
		argv = append(argv, "--")
	}
	switch pwd, ok := spec.Env["PWD"]; {
	case ok && pwd == workDir:
		// bwrap's own PWD is the one asked for: no wrapper, which saves a
		// program start (about 2 ms) on every sandbox.
	case ok:
		// env takes the command right after the assignments: a "--" here
		// would be taken for the command.
		argv = append(argv, "/usr/bin/env", "PWD="+pwd)
	default:
		argv = append(argv, "/usr/bin/env", "-u", "PWD", "--")
	}
	argv = append(argv, spec.Argv...)

	var opts []string
	if spec.AgentDir != "" {
		opts = append(opts, "--ro-bind", spec.AgentDir, engine.AgentMount)
	}
	if fs.root != "" && len(spec.Mounts) > 0 {
		// An environment's tree is read-only: its empty /mnt gets a small
		// tmpfs in which bwrap can make the mount points.
		opts = append(opts, "--size", "65536", "--tmpfs", engine.MountsDir)
	}
	for _, m := range spec.Mounts {
		// bwrap's binds are nosuid and nodev; --ro-bind also read-only.
		bind := "--ro-bind"
		if m.Writable {
			bind = "--bind"
		}
		opts = append(opts, bind, m.Host, m.Sandbox)
	}
	// /dev/shm (POSIX semaphores and shared memory, used by
	// multiprocessing) would otherwise live on bwrap's unsized /dev tmpfs;
	// it gets its own tmpfs with the /tmp size.
	for _, m := range scratchMounts(spec.Limits) {
		switch {
		case scratch != "":
			opts = append(opts, "--bind", filepath.Join(scratch, m.name), m.dir)
		case m.size > 0:
			opts = append(opts, "--size", strconv.FormatInt(m.size, 10), "--tmpfs", m.dir)
		default:
			opts = append(opts, "--tmpfs", m.dir)
		}
	}
	opts = append(opts, "--chdir", workDir, "--clearenv")
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		opts = append(opts, "--setenv", k, spec.Env[k])
	}
	for _, o := range opts {
		data = append(data, o...)
		data = append(data, 0)
	}
	return argv, data
}

// rlimit is one resource limit applied to the shim before it starts bwrap.
type rlimit struct {
	resource int
	value    uint64
}

// rlimits returns the limits that are rlimits: always a core size of 0, and
// RLIMIT_AS / RLIMIT_NPROC for memory and pids when no cgroup enforces them.
//
// RLIMIT_NPROC counts every process of the host uid the sandbox runs as
// (Config.HostUID when sandboxd is root), so as a fallback it is shared by all
// sandboxes at once; cgroups have no such problem.
func rlimits(lim engine.Limits, memCgroup, pidsCgroup bool) []rlimit {
	r := []rlimit{{unix.RLIMIT_CORE, 0}}
	if lim.CPUTime > 0 {
		secs := uint64((lim.CPUTime + time.Second - 1) / time.Second) // round up
		r = append(r, rlimit{unix.RLIMIT_CPU, secs})
	}
	if lim.FileBytes > 0 {
		r = append(r, rlimit{unix.RLIMIT_FSIZE, uint64(lim.FileBytes)})
	}
	if lim.OpenFiles > 0 {
		r = append(r, rlimit{unix.RLIMIT_NOFILE, uint64(lim.OpenFiles)})
	}
	if lim.MemoryBytes > 0 && !memCgroup {
		r = append(r, rlimit{unix.RLIMIT_AS, uint64(lim.MemoryBytes)})
	}
	if lim.Pids > 0 && !pidsCgroup {
		// Without a pids cgroup this counts every process of the host uid,
		// other sandboxes' too (a fork server's spare holds three).
		r = append(r, rlimit{unix.RLIMIT_NPROC, uint64(lim.Pids)})
	}
	return r
}

// nsRlimits are the limits set inside the sandbox's user namespace, once it
// is made (engine.Limits.PendingSignals and LockedBytes): the kernel
// checks what a namespace's users hold, at each level above, against the
// limit its creator had, so the namespaces are made with the host's and
// the sandbox then takes its own share.
func nsRlimits(lim engine.Limits) []rlimit {
	var r []rlimit
	if lim.PendingSignals > 0 {
		r = append(r, rlimit{unix.RLIMIT_SIGPENDING, uint64(lim.PendingSignals)})
	}
	if lim.LockedBytes > 0 {
		r = append(r, rlimit{unix.RLIMIT_MEMLOCK, uint64(lim.LockedBytes)})
	}
	return r
}

// prlimitName is prlimit(1)'s option for each of nsRlimits.
var prlimitName = map[int]string{unix.RLIMIT_SIGPENDING: "sigpending", unix.RLIMIT_MEMLOCK: "memlock"}

// rlimitSetting says, for each rlimit a sandbox's limits can set above
// zero, what it is called (a format for its value), which setting gives
// it and how its hard limit is raised.
var rlimitSetting = map[int]struct{ what, setting, raise string }{
	unix.RLIMIT_NOFILE: {"open-files cap of %d", "--open-files, CODEEXEC_OPEN_FILES", "ulimit -Hn, LimitNOFILE= under systemd, --ulimit nofile= for a container"},
	unix.RLIMIT_FSIZE:  {"file-size cap of %d bytes", "--file-size, CODEEXEC_FILE_SIZE", "ulimit -Hf (in KiB), LimitFSIZE= under systemd, --ulimit fsize= for a container"},
	unix.RLIMIT_CPU:    {"CPU-time cap of %d s", "--cpu-time, CODEEXEC_CPU_TIME", "ulimit -Ht, LimitCPU= under systemd, --ulimit cpu= for a container"},
	unix.RLIMIT_AS:     {"memory cap of %d bytes", "--memory, MCP_BRIDGE_MEMORY", "ulimit -Hv (in KiB), LimitAS= under systemd"},
	unix.RLIMIT_NPROC:  {"process cap of %d", "--pids, MCP_BRIDGE_PIDS", "ulimit -Hu, LimitNPROC= under systemd, --ulimit nproc= for a container"},
	unix.RLIMIT_SIGPENDING: {"queued-signals share of %d", "--max-sessions, CODEEXEC_MAX_SESSIONS (the host's limit is shared out among them)",
		"ulimit -Hi, LimitSIGPENDING= under systemd"},
	unix.RLIMIT_MEMLOCK: {"locked-memory share of %d bytes", "--max-sessions, CODEEXEC_MAX_SESSIONS (the host's limit is shared out among them)",
		"ulimit -Hl (in KiB), LimitMEMLOCK= under systemd"},
}

// hostLimits are what bounds the rlimits this process can give a sandbox.
type hostLimits struct {
	// hard reads this process's hard limit for a resource.
	hard func(resource int) (uint64, error)
	// nrOpen is fs.nr_open, which no RLIMIT_NOFILE may pass (0: unknown).
	nrOpen uint64
	// canRaise is set when this process may pass its own hard limits:
	// CAP_SYS_RESOURCE in the host's user namespace.
	canRaise bool
}

// check reports the first of limits that this process could not set,
// saying what to change instead.
func (h hostLimits) check(limits []rlimit) error {
	for _, l := range limits {
		s, ok := rlimitSetting[l.resource]
		if !ok {
			s.what, s.setting, s.raise = fmt.Sprintf("rlimit %d of %%d", l.resource), "the limits", "ulimit -H"
		}
		what := fmt.Sprintf(s.what, l.value)
		if l.resource == unix.RLIMIT_NOFILE && h.nrOpen > 0 && l.value > h.nrOpen {
			return fmt.Errorf("the sandbox's %s is above the kernel's fs.nr_open of %d: lower it (%s) or raise fs.nr_open (sysctl)", what, h.nrOpen, s.setting)
		}
		if h.canRaise {
			continue
		}
		hard, err := h.hard(l.resource)
		if err != nil {
			return fmt.Errorf("read this process's rlimit %d: %w", l.resource, err)
		}
		if l.value > hard {
			return fmt.Errorf("the sandbox's %s is above this process's hard limit of %d, which it may not raise without CAP_SYS_RESOURCE in the host's user namespace: lower it (%s) or raise the hard limit where codeexec starts (%s)",
				what, hard, s.setting, s.raise)
		}
	}
	return nil
}

// forked are the bounds of a sandbox from the fork server, which sets its
// rlimits in a user namespace of its own: no capability lets it pass a
// hard limit there.
func (h hostLimits) forked() hostLimits {
	h.canRaise = false
	return h
}

// thisHost returns the bounds of this process, read now.
func thisHost() hostLimits {
	h := hostLimits{hard: hardLimit, canRaise: canRaiseLimits()}
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		h.nrOpen, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	return h
}

// hardLimit is this process's hard limit for resource.
func hardLimit(resource int) (uint64, error) {
	var lim unix.Rlimit
	err := unix.Getrlimit(resource, &lim)
	return lim.Max, err
}

// canRaiseLimits reports whether this process may set rlimits above its
// own hard limits: only CAP_SYS_RESOURCE in the initial user namespace
// lets it, and the capabilities a process sees are those of its own
// namespace (root in a rootless container has them all, and no such
// right).
func canRaiseLimits() bool {
	m, err := os.ReadFile("/proc/self/uid_map")
	if err != nil || strings.Join(strings.Fields(string(m)), " ") != "0 0 4294967295" {
		return false
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[unix.CAP_SYS_RESOURCE/32].Effective&(1<<(unix.CAP_SYS_RESOURCE%32)) != 0
}

// gateShim is the script that starts every sandbox. It runs as /bin/sh on
// the host and waits on fd 6 until sandboxd has put it into the sandbox's
// cgroups and lowered its rlimits (prlimit(2) on its PID, which needs no
// privilege while the shim has sandboxd's uid), then execs the rest:
// setpriv, when dropping root, then bwrap. A
// process keeps its cgroups and rlimits across execve, and bwrap forks the
// sandbox only after that, so every sandbox process is born inside the
// limits: there is no window in which a fork could escape them. If
// sandboxd closes the gate without the go-ahead, the shim exits. (cgroup
// v2's CLONE_INTO_CGROUP could join without a shell, but this host family
// runs v1, and one mechanism for both keeps the code small.) Setting the
// rlimits from sandboxd rather than with prlimit(1) saves a program start
// on every sandbox; dropping root still needs setpriv(1), because root
// here may lack CAP_SYS_RESOURCE and so could not limit a process that
// already runs as another user.
const gateShim = `read -r go <&6 && [ "$go" = go ] || exit 125
exec 6<&-
exec "$@"`

// noexecShim, before gateShim, mounts the sandbox's /tmp, /dev/shm and
// /workspace as it is started, while it waits for its gate: tmpfs of the
// sizes asked for, noexec, nosuid and nodev as a container runtime mounts
// them, owned by the sandbox uid, on $4, $5 and $6 (below the engine's
// scratch directory, in the shim's own mount namespace: the host sees
// none of them, and they go with the sandbox), with mount(8) at $7.
// mount does not get the gate (fd 6): a shim killed while mount runs
// must leave no reader of it, so that its release fails.
const noexecShim = `"$7" -t tmpfs -o "$1" tmpfs "$4" 6<&- && "$7" -t tmpfs -o "$2" tmpfs "$5" 6<&- && "$7" -t tmpfs -o "$3" tmpfs "$6" 6<&- || exit 124
shift 7
`

// scratchMount is one of a sandbox's writable tmpfs.
type scratchMount struct {
	name, dir string // below scratch, and in the sandbox
	size      int64  // 0: unsized
}

// scratchMounts are a sandbox's writable tmpfs with lim's sizes.
func scratchMounts(lim engine.Limits) []scratchMount {
	return []scratchMount{{"tmp", "/tmp", lim.TmpBytes}, {"shm", "/dev/shm", lim.TmpBytes}, {"workspace", workDir, lim.WorkspaceBytes}}
}

// shim is what a sandbox's host command line is made of.
type shim struct {
	sh, setpriv, bwrap string
	fs                 rootFS
	// mount and scratch are set when sandboxd is root: mount(8), and an
	// empty directory whose subdirectories each shim mounts its noexec
	// tmpfs on, in a mount namespace of its own (noexecShim).
	mount, scratch string
	hostUID        int
	seccomp        bool
}

// shimArgv returns the complete host command line (the sh shim, setpriv
// when dropping root, then bwrap) and bwrap's --args data.
func shimArgv(c shim, spec engine.Spec) (argv []string, data []byte) {
	a := []string{c.sh, "-c", gateShim, "codeexec-shim"}
	if c.scratch != "" {
		a = []string{c.sh, "-c", noexecShim + gateShim, "codeexec-shim"}
		var dirs []string
		for _, m := range scratchMounts(spec.Limits) {
			o := fmt.Sprintf("noexec,nosuid,nodev,mode=0755,uid=%d,gid=%d", c.hostUID, c.hostUID)
			if m.size > 0 {
				o += ",size=" + strconv.FormatInt(m.size, 10)
			}
			a, dirs = append(a, o), append(dirs, filepath.Join(c.scratch, m.name))
		}
		a = append(append(a, dirs...), c.mount)
	}
	hostUID, setpriv := c.hostUID, c.setpriv
	if setpriv != "" {
		// Drop root before bwrap: the sandbox's processes are then
		// hostUID on the host too, so a namespace escape lands as a user
		// that owns nothing, RLIMIT_NPROC (ignored for root) can work as a
		// fallback, and the user namespaces bwrap makes are hostUID's:
		// the kernel charges to their owner what is made in them.
		a = append(a, setpriv,
			"--reuid", strconv.Itoa(hostUID), "--regid", strconv.Itoa(hostUID),
			"--clear-groups", "--")
	}
	a = append(a, c.bwrap)
	args, data := bwrapArgs(c.fs, spec, c.seccomp, c.scratch)
	return append(a, args...), data
}

// rootFS is what a sandbox's root file system is made of: an
// environment's tree (root), or the host's /usr with etc, the host's /etc
// pieces (engine.HostEtc).
type rootFS struct {
	root string
	etc  []string
}

// args are bwrap's options that build the root file system.
func (fs rootFS) args() []string {
	synthetic := []string{
		"--ro-bind-data", strconv.Itoa(passwdFD), "/etc/passwd",
		"--ro-bind-data", strconv.Itoa(groupFD), "/etc/group"}
	if fs.root != "" {
		// The tree has every mount point a sandbox needs (/proc, /dev,
		// /tmp, /workspace, /opt/codeexec), as environment builds make it.
		// passwd and group are the synthetic ones here too: bwrap reads
		// their descriptors, which would otherwise stay open in the
		// sandbox, and the environment's own say the same of uid 65534.
		return append([]string{"--ro-bind", fs.root, "/"}, synthetic...)
	}
	a := []string{
		"--ro-bind", "/usr", "/usr",
		"--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64",
		"--symlink", "usr/bin", "/bin",
		"--symlink", "usr/sbin", "/sbin",
		"--dir", "/etc",
		"--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache",
	}
	for _, p := range fs.etc {
		a = append(a, "--ro-bind-try", p, p)
	}
	return append(a, synthetic...)
}
