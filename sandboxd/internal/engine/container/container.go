// Package container is the podman and docker engine: each sandbox is one
// container with upstream's flags, attached through the CLI.
package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/agent"
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/cgroup"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/seccomp"
	"github.com/codeexec/codeexec/sandboxd/internal/tempdir"
	"github.com/codeexec/codeexec/services/randomid"
)

// Labels every container engine sets, so that sandboxes can be found again
// (orphan reaping, `docker ps --filter label=codeexec.owner`).
const (
	// LabelOwner names the sandboxd that started a container:
	// "<hostname>/<pid>/<instance>", instance being random per engine.
	LabelOwner = "codeexec.owner"
	// LabelSession is the sandbox ID (engine.Spec.ID).
	LabelSession = "codeexec.session"
	// LabelPIDSpace names the PID namespace of the sandboxd that started
	// a container, as "<boot id>/<namespace inode>": a sandboxd in the
	// same one can tell whether the owner's PID is still that owner's,
	// whatever its host name (compose's replicas share the host's PIDs,
	// each under a host name of its own).
	LabelPIDSpace = "codeexec.pidspace"
	// LabelOwnerStart is when the sandboxd that started a container
	// started: /proc/PID/stat's starttime, clock ticks since boot. In the
	// same PID namespace it tells the owner from a process that took its
	// PID after it died, with no wall clock, which may be stepped.
	LabelOwnerStart = "codeexec.owner-start"
)

// Config configures the podman and docker engines. cmd/ fills it;
// nothing in this package reads the environment.
type Config struct {
	// Runtime is "podman" or "docker".
	Runtime string
	// Path is the CLI binary, a name looked up on PATH or a path. Default:
	// Runtime.
	Path string
	// Image is the image every sandbox runs, e.g. localhost/codeexec-sandbox:latest.
	// It must exist locally: sandboxes never pull (--pull never), so a
	// missing image is an error at Check, not a hang in the first exec.
	Image string
	// User is who every sandbox runs as, uid[:gid] or name[:group] as
	// `run --user` takes it; root is refused. Empty, the default, gives
	// each sandbox a host uid of its own from FirstUID on (see uids.go):
	// with one User, all sandboxes share its per-user kernel counts.
	User string
	// FirstUID and UIDCount are the host uids sandboxes take one each of
	// when User is empty. Zero: DefaultFirstUID and DefaultUIDCount.
	FirstUID, UIDCount int
	// FilesDir is where each sandbox's /etc/passwd and /etc/group are
	// written, in a directory of this engine's below it; default the
	// system temp dir. The runtime resolves bind-mount sources on its own
	// host: with sandboxd in a container, this must be a host directory
	// mounted at the same path (as sandboxd's AgentRoot).
	FilesDir string
	// ExtraArgs are added to every `run`, before the image: e.g.
	// --runtime=runsc for gVisor.
	ExtraArgs []string
	// GlobalArgs go before the subcommand (`podman --runtime runc …`). nil
	// means detect them (podman only, see detectPodmanGlobals); an empty
	// non-nil slice means none.
	GlobalArgs []string
	// CheckArgv is the trial command Check runs in the image. Default
	// ["/bin/sh", "-c", "exit 0"]; sandboxd passes its Python so that a
	// missing interpreter is reported at start.
	CheckArgv []string
	// Nproc is RLIMIT_NPROC inside containers. It counts every process of
	// the host uid (one sandbox's with uids of their own, every sandbox's
	// with User set), so it is a ceiling, not the per-sandbox cap: that is
	// the pids cgroup (--pids-limit). It is always set because podman's
	// default (the host's hard limit, or more) is refused on some hosts.
	// Default 32768.
	Nproc int
	// Limits are the limits sandboxes will get. Check's trial container
	// runs with them, so that one the runtime or the host refuses (more
	// CPUs than the host has, say) is reported when sandboxd starts rather
	// than by every session's start. Zero: small ones of the trial's own.
	Limits engine.Limits
}

// Engine is the podman or docker engine: a sandbox is one container,
// started with upstream's flags (see runArgs) and attached through the
// CLI's stdin and stdout, which carry the channel.
//
// Containers are named codeexec-<engine.Spec.ID> and labelled with LabelOwner and
// LabelSession. They run without --rm so that, after exit, `inspect` can
// still say whether the kernel killed them for memory; the engine removes
// each one itself once it has exited. Containers left behind by a sandboxd
// that died are removed by the next Check and by Close (see reapOrphans).
type Engine struct {
	cfg    Config
	logger *slog.Logger

	bin     string
	lookErr error
	owner   string
	host    string
	// pidSpace and ownerStart are LabelPIDSpace's and LabelOwnerStart's
	// values for this process; neither label is set when either cannot
	// be read.
	pidSpace, ownerStart string
	// workDir is the CLI's working directory: conmon (podman) drops files
	// such as "oom" into it, which must not land in sandboxd's own.
	workDir string
	// seccompProfile is the profile file every container gets, in workDir;
	// empty when ExtraArgs bring their own.
	seccompProfile string
	// capSockets is set while this host's v1 memory cgroups count socket
	// buffers only once told to (cgroup.ShareSockets), and the containers'
	// cgroups can be seen from here: Start then caps them before it returns.
	capSockets atomic.Bool

	checkMu sync.Mutex // serialises Check; guards checked and global
	checked bool
	global  []string

	live engine.Live[*process]
	mu   sync.Mutex // guards the sweeper's channels

	// uids hands out host uids when Config.User is empty; shared is set
	// when the engine is rootless, whose containers cannot take them
	// (their uids map into the invoking user's subordinate range).
	uids   *uidPool
	shared atomic.Bool
	// users holds the sandboxes' passwd and group files, made on first
	// use (usersMu).
	usersMu sync.Mutex
	users   *tempdir.Dir

	// The sweeper removes orphans every sweepEvery after the first Check:
	// the containers of a replica that died elsewhere exit (their stdin
	// closes) but nobody else would remove them.
	sweepStop chan struct{}
	sweepDone chan struct{}
}

var _ engine.Engine = (*Engine)(nil)

// New returns a podman or docker engine. Like bwrap.New it does not
// fail when the CLI is missing; Check says what to install.
func New(cfg Config, logger *slog.Logger) (*Engine, error) {
	switch cfg.Runtime {
	case "podman", "docker":
	default:
		return nil, fmt.Errorf("container runtime %q: want podman or docker", cfg.Runtime)
	}
	if cfg.Image == "" {
		return nil, fmt.Errorf("%s runtime: no image: set MCP_BRIDGE_IMAGE (--image), e.g. localhost/codeexec-sandbox:latest built by deploy/build-images.sh", cfg.Runtime)
	}
	if cfg.Path == "" {
		cfg.Path = cfg.Runtime
	}
	if err := CheckUser(cfg.User); err != nil {
		return nil, err
	}
	if cfg.FirstUID == 0 && cfg.UIDCount == 0 {
		cfg.FirstUID, cfg.UIDCount = DefaultFirstUID, DefaultUIDCount
	}
	if len(cfg.CheckArgv) == 0 {
		cfg.CheckArgv = []string{"/bin/sh", "-c", "exit 0"}
	}
	if cfg.Nproc <= 0 {
		cfg.Nproc = 32768
	}
	var uids *uidPool
	if cfg.User == "" {
		if err := checkUIDRange(cfg.FirstUID, cfg.UIDCount); err != nil {
			return nil, err
		}
		if err := checkHostUIDs(cfg.FirstUID, cfg.UIDCount, hostIDFiles); err != nil {
			return nil, err
		}
		uids = newUIDPool(cfg.FirstUID, cfg.UIDCount)
	}
	var err error
	host, _ := os.Hostname()
	c := &Engine{
		cfg: cfg, logger: logger.With("runtime", cfg.Runtime),
		uids:     uids,
		host:     host,
		owner:    fmt.Sprintf("%s/%d/%s", host, os.Getpid(), randomid.Hex(4)),
		pidSpace: thisPIDSpace(),
	}
	if ticks, ok := processStartTicks(os.Getpid()); ok && c.pidSpace != "" {
		c.ownerStart = strconv.FormatInt(ticks, 10)
	} else {
		c.pidSpace = ""
	}
	// One fixed directory for every engine: a sandboxd that is killed
	// leaves nothing behind.
	c.workDir = filepath.Join(os.TempDir(), "codeexec-engine-cwd")
	if err := os.MkdirAll(c.workDir, 0o700); err != nil {
		return nil, fmt.Errorf("%s runtime: work directory: %w", cfg.Runtime, err)
	}
	if !slices.ContainsFunc(cfg.ExtraArgs, func(a string) bool { return strings.Contains(a, "seccomp") }) {
		if c.seccompProfile, err = writeSeccompProfile(c.workDir); err != nil {
			return nil, fmt.Errorf("%s runtime: %w", cfg.Runtime, err)
		}
	}
	if c.bin, err = engine.LookPath(cfg.Path); err != nil {
		c.lookErr = fmt.Errorf("%w: %s is not installed (%s not found): %s", engine.ErrUnavailable, cfg.Runtime, cfg.Path, installAdvice(cfg.Runtime))
	}
	c.capSockets.Store(os.Geteuid() == 0 && cgroup.TCPAccountingV1())
	liveOwners.Store(c.owner, true)
	return c, nil
}

// liveOwners holds the owners of this process's open engines. Another
// engine's containers are never orphans while it is open, even though its
// owner names this process's PID (see orphan).
var liveOwners sync.Map

func installAdvice(rt string) string {
	if rt == "podman" {
		return "run `apt-get install podman runc catatonit` (Debian/Ubuntu) or `dnf install podman`"
	}
	return "run `apt-get install docker.io` (Debian/Ubuntu) or install Docker Engine, then start the daemon (`systemctl start docker`, or `dockerd &` as root)"
}

// Name implements engine.Engine.
func (c *Engine) Name() string { return c.cfg.Runtime }

// Owner is the value of LabelOwner on this engine's containers.
func (c *Engine) Owner() string { return c.owner }

// ownerLabels are the labels naming this engine on a container it starts.
func (c *Engine) ownerLabels() []string {
	a := []string{"--label", LabelOwner + "=" + c.owner}
	if c.pidSpace != "" {
		a = append(a, "--label", LabelPIDSpace+"="+c.pidSpace, "--label", LabelOwnerStart+"="+c.ownerStart)
	}
	return a
}

// cli runs the CLI with args and returns its stdout; a failure carries the
// trimmed stderr.
func (c *Engine) cli(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.bin, append(c.globals(), args...)...)
	cmd.Dir = c.workDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return stdout.String(), errors.New(msg)
	}
	return stdout.String(), nil
}

func (c *Engine) globals() []string {
	c.checkMu.Lock()
	defer c.checkMu.Unlock()
	return c.global
}

// containerName is the container name of sandbox id.
func containerName(id string) string { return "codeexec-" + id }

// CheckLimits accepts every limit (engine.Engine): the container runtime
// sets the rlimits, with its own rights, and its refusal comes with the
// start that asked for them.
func (c *Engine) CheckLimits(engine.Limits) error { return nil }

// Start implements engine.Engine. ctx bounds only the start of the CLI.
func (c *Engine) Start(ctx context.Context, spec engine.Spec) (engine.Process, error) {
	if c.lookErr != nil {
		return nil, c.lookErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Values reach the container CLI as --env arguments; newlines are
	// refused there as well as NUL.
	if err := engine.ValidateSpec(spec, "\x00\n", "NUL or newline"); err != nil {
		return nil, err
	}
	if c.live.Closed() {
		return nil, engine.ErrClosed
	}
	p, err := c.startProcess(spec)
	if err != nil {
		return nil, fmt.Errorf("start %s sandbox %s: %w", c.cfg.Runtime, spec.ID, err)
	}
	p.awaitSocketCap(ctx)
	if !c.live.Add(p) { // Close ran meanwhile and missed p
		_ = p.Kill()
		_ = p.Wait()
		return nil, engine.ErrClosed
	}
	return p, nil
}

// Close implements engine.Engine: it removes every live container, waits for their
// CLIs, then removes any other container this engine owns.
func (c *Engine) Close() error {
	c.mu.Lock() // closing and stopping the sweeper are one step for Check
	live, first := c.live.Close()
	if !first {
		c.mu.Unlock()
		return nil
	}
	defer liveOwners.Delete(c.owner)
	if c.sweepStop != nil {
		close(c.sweepStop)
		defer func() { <-c.sweepDone }()
	}
	c.mu.Unlock()
	if c.lookErr != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(live) > 0 {
		names := make([]string, 0, len(live))
		for _, p := range live {
			p.markKilled()
			names = append(names, p.name)
		}
		// One CLI call for all: a shutdown with many sessions stays quick.
		_, _ = c.cli(ctx, append([]string{"rm", "-f"}, names...)...)
		for _, p := range live {
			_ = p.killCLI()
		}
		for _, p := range live {
			_ = p.Wait()
		}
	}
	c.checkMu.Lock()
	checked := c.checked
	c.checkMu.Unlock()
	if checked { // the engine is known to answer
		c.reapOrphans(ctx, true)
	}
	c.removeUsers()
	return nil
}

// Prepare implements engine.Engine: it compiles the agent in agentDir with the
// image's own interpreter, python, in a one-off container (no network, no
// capabilities) that mounts agentDir read-write at engine.AgentMount (see
// agent.PrecompileWith).
func (c *Engine) Prepare(ctx context.Context, agentDir, python string) error {
	if c.lookErr != nil {
		return c.lookErr
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	args := []string{"run", "--rm", "--pull", "never", "--network", "none", "--read-only",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "0:0", "--log-driver", "none",
		"--name", containerName("compile-" + randomid.Hex(4)),
		"--mount", "type=bind,src=" + agentDir + ",dst=" + engine.AgentMount}
	args = append(args, c.ownerLabels()...)
	args = append(args, c.ulimits(engine.Limits{})...)
	args = append(args, c.cfg.ExtraArgs...)
	args = append(args, c.cfg.Image, python)
	return agent.PrecompileWith(ctx, func(ctx context.Context, compile []string) error {
		if out, err := c.cli(ctx, slices.Concat(args, compile)...); err != nil {
			return fmt.Errorf("compile the agent in %s: %w %s", c.cfg.Image, err, out)
		}
		return nil
	}, agentDir, engine.AgentMount)
}

// writeSeccompProfile writes seccomp.ContainerProfile into dir (atomically:
// engines of one process share dir and write the same bytes) and returns
// its path.
func writeSeccompProfile(dir string) (string, error) {
	profile, err := seccomp.ContainerProfile()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "seccomp-*.tmp")
	if err != nil {
		return "", fmt.Errorf("write seccomp profile: %w", err)
	}
	_, err = f.Write(profile)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	path := filepath.Join(dir, "seccomp.json")
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("write seccomp profile: %w", err)
	}
	return path, nil
}
