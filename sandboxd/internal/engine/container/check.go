package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/services/randomid"
	"github.com/codeexec/codeexec/services/tick"
)

// sweepEvery is how often orphans are looked for after the first Check.
const sweepEvery = time.Minute

// Check implements engine.Engine: the CLI is installed, the daemon answers, the
// image exists locally and a trial container with every flag runs. The
// first success also removes orphaned containers. Success is remembered.
func (c *Engine) Check(ctx context.Context) error {
	if c.lookErr != nil {
		return c.lookErr
	}
	c.checkMu.Lock()
	if c.checked {
		c.checkMu.Unlock()
		return nil
	}
	c.checkMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()

	if err := c.checkDaemon(ctx); err != nil {
		return err
	}
	if _, err := c.cli(ctx, "image", "inspect", "--format", "{{.Id}}", c.cfg.Image); err != nil {
		return fmt.Errorf("%w: image %s not found locally (%s) and sandboxes never pull one: "+
			"build it with deploy/build-images.sh (works offline), or where a registry is reachable `%s pull %s`",
			engine.ErrUnavailable, c.cfg.Image, decisiveLine(err.Error()), c.cfg.Runtime, c.cfg.Image)
	}
	c.reapOrphans(ctx, false)
	if err := c.trial(ctx); err != nil {
		return err
	}
	c.checkMu.Lock()
	c.checked = true
	c.checkMu.Unlock()
	c.mu.Lock()
	if !c.live.Closed() && c.sweepStop == nil {
		c.sweepStop, c.sweepDone = make(chan struct{}), make(chan struct{})
		go c.sweep(c.sweepStop, c.sweepDone)
	}
	c.mu.Unlock()
	return nil
}

func (c *Engine) sweep(stop, done chan struct{}) {
	defer close(done)
	tick.Every(stop, sweepEvery, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.reapOrphans(ctx, false)
	})
}

// checkDaemon asks the engine for its state and sets the global args.
func (c *Engine) checkDaemon(ctx context.Context) error {
	if c.cfg.Runtime == "docker" {
		if _, err := c.cli(ctx, "version", "--format", "{{.Server.Version}}"); err != nil {
			msg := err.Error()
			if strings.Contains(msg, "Cannot connect") || strings.Contains(msg, "Is the docker daemon running") ||
				strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such file") {
				return fmt.Errorf("%w: the Docker daemon is not running (%s): start it: `systemctl start docker`, or `dockerd &` as root; "+
					"with a remote daemon set DOCKER_HOST", engine.ErrUnavailable, decisiveLine(msg))
			}
			if strings.Contains(msg, "permission denied") {
				return fmt.Errorf("%w: no permission to use the Docker daemon (%s): add the user to the docker group or run sandboxd as root", engine.ErrUnavailable, decisiveLine(msg))
			}
			return fmt.Errorf("%w: docker does not answer: %s", engine.ErrUnavailable, decisiveLine(msg))
		}
		c.checkMu.Lock()
		if c.cfg.GlobalArgs != nil {
			c.global = c.cfg.GlobalArgs
		}
		c.checkMu.Unlock()
		opts, _ := c.cli(ctx, "info", "--format", "{{json .SecurityOptions}}")
		c.setRootless(strings.Contains(opts, "name=rootless"))
		return nil
	}
	out, err := c.cli(ctx, "info", "--format", "{{.Host.CgroupsVersion}} {{.Host.CgroupManager}} {{.Host.OCIRuntime.Name}} {{.Host.Security.Rootless}}")
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "Cannot connect to Podman") {
			return fmt.Errorf("%w: the podman service is not reachable (%s): start it (`systemctl start podman.socket`) or unset CONTAINER_HOST", engine.ErrUnavailable, decisiveLine(msg))
		}
		return fmt.Errorf("%w: `podman info` failed: %s", engine.ErrUnavailable, decisiveLine(msg))
	}
	info := strings.Fields(out)
	if len(info) == 4 {
		c.setRootless(info[3] == "true")
		info = info[:3]
	}
	global := c.cfg.GlobalArgs
	if global == nil {
		global = detectPodmanGlobals(info, func(name string) bool { _, err := engine.LookPath(name); return err == nil },
			dirExists("/run/systemd/system"))
	}
	c.checkMu.Lock()
	c.global = global
	c.checkMu.Unlock()
	if len(global) > 0 {
		c.logger.Info("podman global options chosen for this host", "args", strings.Join(global, " "))
	}
	return nil
}

// setRootless records whether the engine is rootless. Its containers' uids
// map into the invoking user's subordinate range, where the sandboxes' own
// uids do not exist, and the kernel charges all of them to the invoking
// user anyway: they share one uid then.
func (c *Engine) setRootless(rootless bool) {
	if rootless && c.uids != nil && !c.shared.Swap(true) {
		c.logger.Warn("the engine is rootless: every sandbox runs as uid 65534 inside, and the kernel counts what they make per user against the user running the engine", "user", sharedUser)
	}
}

// detectPodmanGlobals picks podman's global options from `podman info`
// (cgroups version, cgroup manager, OCI runtime). On a cgroup v1 or hybrid
// host crun refuses to run containers, so runc is used when it is
// installed; without a running systemd the systemd cgroup manager cannot
// work, so cgroupfs is used. Where podman's own defaults already are these,
// nothing is added.
func detectPodmanGlobals(info []string, have func(string) bool, systemd bool) []string {
	var out []string
	if len(info) != 3 {
		return out
	}
	version, manager, oci := info[0], info[1], info[2]
	if version != "v2" && oci != "runc" && have("runc") {
		out = append(out, "--runtime", "runc")
	}
	if manager == "systemd" && !systemd {
		out = append(out, "--cgroup-manager", "cgroupfs")
	}
	return out
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// checkTimeout bounds Check: the daemon's answer, the image and the trial.
const checkTimeout = 60 * time.Second

// trialLimits are the trial's limits when Config.Limits is zero.
var trialLimits = engine.Limits{MemoryBytes: 64 << 20, Pids: 16, TmpBytes: 1 << 20, WorkspaceBytes: 1 << 20, OpenFiles: 64}

// trial runs CheckArgv in a container with every flag a sandbox gets, and
// the limits it will get (Config.Limits).
func (c *Engine) trial(ctx context.Context) error {
	lim := c.cfg.Limits
	if lim == (engine.Limits{}) {
		lim = trialLimits
	}
	spec := engine.Spec{ID: "check-" + randomid.Hex(4), Argv: c.cfg.CheckArgv, Limits: lim}
	who, err := c.claim(spec.ID)
	if err != nil {
		return fmt.Errorf("%w: a trial %s sandbox: %w", engine.ErrUnavailable, c.cfg.Runtime, err)
	}
	args := append(c.globals(), c.runArgs(spec, who)...)
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir = c.workDir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	_, rmErr := c.cli(context.WithoutCancel(ctx), "rm", "-f", containerName(spec.ID))
	c.unclaim(who, rmErr != nil && !goneAlready(rmErr))
	if err != nil {
		msg := strings.TrimSpace(out.String())
		why := err.Error() // e.g. "exit status 3"
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			why = fmt.Sprintf("it did not finish within %s", checkTimeout)
		case ctx.Err() != nil:
			why = "the check was cancelled"
		}
		advice := ""
		lower := strings.ToLower(msg)
		switch {
		case strings.Contains(lower, "range of cpus"):
			advice = fmt.Sprintf(": lower MCP_BRIDGE_CPUS (--cpus, %g now) to at most the cores the host has, or to 0 for no cap", lim.CPUs)
		case strings.Contains(msg, "rlimit"):
			advice = ": the host refuses a resource limit; lower --open-files, --file-size or --cpu-time, or pass the engine other --ulimit values through --runtime-arg"
		case strings.Contains(msg, "init binary") || strings.Contains(msg, "libexec/podman/catatonit"):
			advice = ": --init needs podman's init: `apt-get install catatonit`"
		case strings.Contains(lower, "no such file or directory") || strings.Contains(lower, "executable file not found"):
			advice = fmt.Sprintf(": the image %s lacks %s; use an image with Python at that path or set --python", c.cfg.Image, c.cfg.CheckArgv[0])
		case strings.Contains(msg, "cgroup"):
			advice = ": on cgroup v1 hosts podman needs `--runtime runc --cgroup-manager cgroupfs` (detected automatically when runc is installed: `apt-get install runc`)"
		}
		if msg == "" { // the command failed and said nothing
			return fmt.Errorf("%w: a trial %s sandbox failed (%s)%s", engine.ErrUnavailable, c.cfg.Runtime, why, advice)
		}
		return fmt.Errorf("%w: a trial %s sandbox failed (%s): %s%s", engine.ErrUnavailable, c.cfg.Runtime, why, decisiveLine(msg), advice)
	}
	return nil
}

// decisiveLine is the line of a CLI's output that says what went wrong:
// the CLIs put it last ("Error: …"), except that docker follows it with a
// pointer to its help ("Run 'docker run --help' for more information"),
// which is passed over.
func decisiveLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i > 0; i-- {
		l := strings.TrimSpace(lines[i])
		helpPointer := strings.HasPrefix(l, "Run '") || strings.HasPrefix(l, "See '")
		if l != "" && !helpPointer {
			return l
		}
	}
	return strings.TrimSpace(lines[0])
}
