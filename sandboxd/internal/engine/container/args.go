package container

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
//     seccomp option of their own.
func (c *Engine) runArgs(spec engine.Spec) []string {
	lim := spec.Limits
	a := []string{"run", "-i", "--pull", "never", "--name", containerName(spec.ID),
		"--label", LabelOwner + "=" + c.owner, "--label", LabelSession + "=" + spec.ID}
	for _, k := range slices.Sorted(maps.Keys(spec.Labels)) {
		a = append(a, "--label", k+"="+spec.Labels[k])
	}
	a = append(a,
		"--network", "none", "--read-only", "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges", "--user", c.cfg.User,
	)
	if c.seccompProfile != "" {
		a = append(a, "--security-opt", "seccomp="+c.seccompProfile)
	}
	a = append(a,
		"--init", "--log-driver", "none",
		"--workdir", "/workspace",
		"--tmpfs", "/tmp:"+tmpfsOpts(lim.TmpBytes),
		"--tmpfs", "/workspace:"+tmpfsOpts(lim.WorkspaceBytes)+c.ownerOpts(),
		"--tmpfs", "/sys/fs/cgroup:ro,nosuid,nodev,noexec,size=4k",
	)
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
	openFiles := lim.OpenFiles
	if openFiles <= 0 {
		openFiles = 1024
	}
	a = append(a, "--ulimit", fmt.Sprintf("nofile=%d:%d", openFiles, openFiles),
		"--ulimit", fmt.Sprintf("nproc=%d:%d", c.cfg.Nproc, c.cfg.Nproc),
		"--ulimit", "core=0:0")
	if lim.CPUTime > 0 {
		secs := int64((lim.CPUTime + time.Second - 1) / time.Second)
		a = append(a, "--ulimit", fmt.Sprintf("cpu=%d:%d", secs, secs))
	}
	if lim.FileBytes > 0 {
		a = append(a, "--ulimit", fmt.Sprintf("fsize=%d:%d", lim.FileBytes, lim.FileBytes))
	}
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

// ownerOpts makes docker's /workspace tmpfs belong to a numeric container
// user. docker copies the mode and owner of the image's mount point onto a
// tmpfs (so mode= is lost when the image has the directory); uid= and gid=
// survive that. podman refuses uid=; it keeps mode= when the image lacks
// the directory, and otherwise the image's mode (deploy's image makes
// /workspace 1777).
func (c *Engine) ownerOpts() string {
	if c.cfg.Runtime != "docker" {
		return ""
	}
	u, g, hasG := strings.Cut(c.cfg.User, ":")
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

// staleAfter is how long an exited container of another owner is left
// alone: its owner may still be about to inspect and remove it.
const staleAfter = time.Minute

// reapOrphans removes containers labelled as codeexec's that nobody will
// clean up:
//   - at Close (all), every container this engine owns;
//   - containers of an earlier sandboxd on this host: same hostname, other
//     instance, and a PID that is gone or is now this process's own (PID 1
//     in a container restarted under the same hostname), unless that owner
//     is another engine still open in this process;
//   - exited containers of any owner, finished more than staleAfter ago
//     (a sandboxd elsewhere, e.g. a compose replica, that died).
//
// Errors are logged: reaping is housekeeping.
func (c *Engine) reapOrphans(ctx context.Context, all bool) {
	out, err := c.cli(ctx, "ps", "-a", "-q", "--no-trunc", "--filter", "label="+LabelOwner)
	if err != nil {
		c.logger.Warn("could not list containers for orphan reaping", "error", err)
		return
	}
	ids := strings.Fields(out)
	if len(ids) == 0 {
		return
	}
	out, err = c.cli(ctx, append([]string{"inspect", "--format",
		`{{.Name}}|{{index .Config.Labels "` + LabelOwner + `"}}|{{.State.Status}}|{{.State.FinishedAt}}`}, ids...)...)
	if err != nil && out == "" {
		c.logger.Warn("could not inspect containers for orphan reaping", "error", err)
		return
	}
	var doomed []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 4 {
			continue
		}
		name := strings.TrimPrefix(f[0], "/")
		if c.orphan(f[1], f[2], f[3], all, time.Now()) {
			doomed = append(doomed, name)
		}
	}
	if len(doomed) == 0 {
		return
	}
	c.logger.Info("removing orphaned sandbox containers", "count", len(doomed), "names", strings.Join(doomed, " "))
	if _, err := c.cli(ctx, append([]string{"rm", "-f"}, doomed...)...); err != nil {
		c.logger.Warn("could not remove orphaned containers", "error", err)
	}
}

// orphan decides for one container (see reapOrphans).
func (c *Engine) orphan(owner, state, finished string, all bool, now time.Time) bool {
	if owner == c.owner {
		return all
	}
	if _, open := liveOwners.Load(owner); open {
		return false // another engine of this process
	}
	host, rest, _ := strings.Cut(owner, "/")
	pidStr, _, _ := strings.Cut(rest, "/")
	if host == c.host {
		pid, err := strconv.Atoi(pidStr)
		if err == nil && (pid == os.Getpid() || !ownerAlive(pid)) {
			return true
		}
	}
	if state == "exited" || state == "dead" {
		t, err := time.Parse(time.RFC3339Nano, finished)
		if err != nil {
			// podman prints "2006-01-02 15:04:05.999999999 -0700 MST".
			t, err = time.Parse("2006-01-02 15:04:05.999999999 -0700 MST", finished)
		}
		return err == nil && now.Sub(t) > staleAfter
	}
	return false
}

// ownerAlive reports whether pid exists (signal 0).
func ownerAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
