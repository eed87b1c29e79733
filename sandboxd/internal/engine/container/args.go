package container

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
)

// runArgs returns the `run` command line (without global args) for spec.
// The flags are upstream's (--network none, --read-only, --cap-drop ALL,
// no-new-privileges, a non-root user, pids and memory caps, noexec tmpfs
// for /tmp and /workspace) plus what the bwrap engine also guarantees:
//   - --init: a real PID 1 reaps orphaned children (they would otherwise
//     pile up as zombies against the pids cap) and kills the rest when the
//     agent exits;
//   - --memory-swap equal to --memory: no swap beyond the cap;
//   - a sized /dev/shm and ulimits for open files, core dumps, CPU time and
//     file size from engine.Limits; RLIMIT_NPROC as a host-wide ceiling (see
//     Config.Nproc);
//   - an empty read-only tmpfs over /sys/fs/cgroup, which would show the
//     host's cgroup layout;
//   - --log-driver none: the channel must not also be copied to a log file;
//   - --pull never: a missing image is an error, never a registry access;
//   - --security-opt seccomp=: Docker's default profile less the calls
//     the bwrap engine refuses too (package seccomp), unless ExtraArgs bring a
//     seccomp option of their own;
//   - the user w: a host uid of the sandbox's own, named in the
//     /etc/passwd and /etc/group mounted for it (see claim), or
//     Config.User.
func (c *Engine) runArgs(spec engine.Spec, w identity) []string {
	lim := spec.Limits
	a := []string{"run", "-i", "--pull", "never", "--name", containerName(spec.ID), "--label", LabelSession + "=" + spec.ID}
	a = append(a, c.ownerLabels()...)
	for _, k := range slices.Sorted(maps.Keys(spec.Labels)) {
		a = append(a, "--label", k+"="+spec.Labels[k])
	}
	a = append(a,
		"--network", "none", "--read-only", "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges",
	)
	a = append(a, w.args()...)
	if c.seccompProfile != "" {
		a = append(a, "--security-opt", "seccomp="+c.seccompProfile)
	}
	a = append(a,
		"--init", "--log-driver", "none",
		"--workdir", "/workspace",
		"--tmpfs", "/tmp:"+tmpfsOpts(lim.TmpBytes),
		"--tmpfs", "/workspace:"+tmpfsOpts(lim.WorkspaceBytes)+c.ownerOpts(w.user),
		"--tmpfs", "/sys/fs/cgroup:ro,nosuid,nodev,noexec,size=4k",
	)
	for _, m := range spec.Mounts {
		// The engine resolves src on its own host: with sandboxd in a
		// container, the directory must be the host's at that path.
		opt := "type=bind,src=" + m.Host + ",dst=" + m.Sandbox
		if !m.Writable {
			opt += ",readonly"
		}
		a = append(a, "--mount", opt)
	}
	if c.cfg.Runtime == "podman" {
		// podman's --read-only also mounts writable tmpfs on /run, /tmp and
		// /var/tmp by default: only the two sized ones above may exist.
		// It also adds default variables (TERM, container=podman):
		// the environment is engine.Spec.Env only.
		a = append(a, "--read-only-tmpfs=false", "--unsetenv-all")
	}
	shm := lim.TmpBytes
	if shm <= 0 || (lim.MemoryBytes > 0 && shm > lim.MemoryBytes) {
		shm = 64 << 20
	}
	a = append(a, "--shm-size", strconv.FormatInt(shm, 10))
	if lim.Pids > 0 {
		a = append(a, "--pids-limit", strconv.Itoa(lim.Pids))
	}
	if lim.MemoryBytes > 0 {
		m := strconv.FormatInt(lim.MemoryBytes, 10)
		a = append(a, "--memory", m, "--memory-swap", m)
	}
	if lim.CPUs > 0 {
		a = append(a, "--cpus", strconv.FormatFloat(lim.CPUs, 'f', -1, 64))
	}
	a = append(a, c.ulimits(lim)...)
	if spec.AgentDir != "" {
		a = append(a, "--mount", "type=bind,src="+spec.AgentDir+",dst="+engine.AgentMount+",readonly")
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		a = append(a, "--env", k+"="+spec.Env[k])
	}
	a = append(a, c.cfg.ExtraArgs...)
	a = append(a, c.cfg.Image)
	return append(a, spec.Argv...)
}

// ulimits returns the --ulimit options for lim: open files (1024 unless
// lim says), the host-wide RLIMIT_NPROC ceiling, no core dumps, and CPU
// time, file size, queued signals and locked memory when lim sets them.
// Every container gets them, the one-off compile of Prepare too: podman's
// own defaults (the host's hard limits) are refused on some hosts.
func (c *Engine) ulimits(lim engine.Limits) []string {
	openFiles := lim.OpenFiles
	if openFiles <= 0 {
		openFiles = 1024
	}
	a := []string{"--ulimit", fmt.Sprintf("nofile=%d:%d", openFiles, openFiles),
		"--ulimit", fmt.Sprintf("nproc=%d:%d", c.cfg.Nproc, c.cfg.Nproc),
		"--ulimit", "core=0:0"}
	if lim.CPUTime > 0 {
		secs := int64((lim.CPUTime + time.Second - 1) / time.Second)
		a = append(a, "--ulimit", fmt.Sprintf("cpu=%d:%d", secs, secs))
	}
	if lim.FileBytes > 0 {
		a = append(a, "--ulimit", fmt.Sprintf("fsize=%d:%d", lim.FileBytes, lim.FileBytes))
	}
	// Without a user namespace of its own, a container's queued signals
	// and locked memory count against its host uid (its own, or with
	// Config.User every sandbox's): each process gets the share bwrap's
	// sandboxes get.
	if lim.PendingSignals > 0 {
		a = append(a, "--ulimit", fmt.Sprintf("sigpending=%d:%d", lim.PendingSignals, lim.PendingSignals))
	}
	if lim.LockedBytes > 0 {
		a = append(a, "--ulimit", fmt.Sprintf("memlock=%d:%d", lim.LockedBytes, lim.LockedBytes))
	}
	return a
}

// ownerOpts makes docker's /workspace tmpfs belong to a numeric container
// user. docker copies the mode and owner of the image's mount point onto a
// tmpfs (so mode= is lost when the image has the directory); uid= and gid=
// survive that. podman refuses uid=; it keeps mode= when the image lacks
// the directory, and otherwise the image's mode (deploy's image makes
// /workspace 1777).
func (c *Engine) ownerOpts(user string) string {
	if c.cfg.Runtime != "docker" {
		return ""
	}
	u, g, hasG := strings.Cut(user, ":")
	if _, err := strconv.Atoi(u); err != nil {
		return ""
	}
	o := ",uid=" + u
	if _, err := strconv.Atoi(g); hasG && err == nil {
		o += ",gid=" + g
	}
	return o
}

func tmpfsOpts(size int64) string {
	o := "rw,noexec,nosuid,nodev,mode=1777"
	if size > 0 {
		o += ",size=" + strconv.FormatInt(size, 10)
	}
	return o
}
