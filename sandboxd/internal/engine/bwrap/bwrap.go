// Package bwrap is the bubblewrap engine, the default: no daemon and no
// image, the host's /usr read-only in fresh namespaces, with cgroup caps,
// rlimits and a seccomp filter, and spare launchers for quick starts.
package bwrap

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/agent"
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/cgroup"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/forkserver"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/seccomp"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/spare"
	"github.com/codeexec/codeexec/sandboxd/internal/tempdir"
)

// Config configures the bubblewrap engine. cmd/ fills it; nothing in
// this package reads the environment.
type Config struct {
	// Path is the bwrap binary, a name looked up on PATH or a path.
	// Default "bwrap".
	Path string
	// CgroupRoot is where the cgroup hierarchies are mounted.
	// Default "/sys/fs/cgroup".
	CgroupRoot string
	// Spares is how many launchers (launcher.go) to keep started, confined
	// and waiting for the next sandboxes, and with the fork server how
	// many sandboxes it keeps set up and waiting for their command
	// (forkspares.go). They are made for the command line (for launchers)
	// and limits of the latest Start. 0 keeps none.
	Spares int
	// Root is the environment's root file system (package environment)
	// that sandboxes run in, read-only; "" runs them on the host's /usr.
	Root string
	// Preload are the modules the fork server imports before it forks
	// (an environment's heavy modules), when it has them.
	Preload []string
	// ForkServer starts sandboxes from a fork server (package forkserver)
	// while one runs, with the isolation bwrap gives them; the first Start
	// starts it, and sandboxes start with bwrap until it is up, and again
	// whenever it has died, until it is restarted.
	ForkServer bool

	// HostUID is the host uid (and gid) that sandboxes, bwrap and the fork
	// server run as when sandboxd is root, and that owns their user
	// namespaces: the kernel charges to it, against its host-wide
	// limits, what the sandboxes make (queued signals, processes). It
	// must be used by nothing else. Default engine.DefaultHostUID.
	HostUID int

	// forkOnly, for tests, makes Start wait for the fork server and fail
	// rather than use bwrap.
	forkOnly bool
	// warmWait, for tests, replaces the package's warmWait when set.
	warmWait time.Duration
}

// Engine is the bubblewrap engine: a sandbox is a bwrap process with every
// namespace unshared, the host's /usr bound read-only, no network, no
// capabilities and uid 65534. Memory and pids are capped with cgroups when
// sandboxd may create them (it must be root for that), else with rlimits.
//
// When sandboxd runs as root, bwrap itself is started as Config.HostUID, so
// engine.Spec.AgentDir and every directory above it must be readable and
// searchable by "others".
//
// With Config.Spares, the engine keeps launchers (launcher.go) that
// are already inside their cgroups and limits, so that a start skips the
// slow part of that set-up.
type Engine struct {
	cfg    Config
	logger *slog.Logger

	// dropRoot is set when sandboxd is root: bwrap and the sandbox then run
	// as Config.HostUID on the host (see shimArgv).
	dropRoot bool
	// host bounds the rlimits a sandbox can be given, as read at New.
	host hostLimits
	// Host programs, resolved once. setpriv and mount are used only with
	// dropRoot.
	bwrap, sh, setpriv, mount string
	lookErr                   error
	// scratch, with dropRoot, is the empty directory below which each
	// sandbox's shim mounts its noexec tmpfs (noexecShim).
	scratch *tempdir.Dir
	// seccomp is the filter every sandbox gets (package seccomp); nil if this
	// architecture has none.
	seccomp []byte
	// fs is what every sandbox's root file system is made of.
	fs rootFS

	cgroups *cgroup.Manager // nil: rlimits only

	checkMu sync.Mutex // serialises Check; guards checked
	checked bool

	noForkOnce sync.Once // says once that the fork server cannot run

	live engine.Live[*process]

	// spares are the launchers kept for the latest start's command line
	// and limits (launcher.go), forkSpares the fork server's sandboxes
	// kept for the latest start from it (forkspares.go).
	spares     *spare.Pool[launchKey, *launcher]
	forkSpares *spare.Pool[forkSpareKey, *forkSpare]

	mu sync.Mutex // guards the fields below
	// python and agentDir are what Prepare was given; forks supervises
	// the fork server once one was asked for (fork.go).
	python, agentDir string
	forks            *forkserver.Supervisor
}

var _ engine.Engine = (*Engine)(nil)

// New returns the engine. It does not fail when bwrap is missing;
// Check reports that, so sandboxd can start and say what to install. It
// prepares the cgroup parents when possible and logs when it falls back to
// rlimits.
func New(cfg Config, logger *slog.Logger) (*Engine, error) {
	if cfg.Path == "" {
		cfg.Path = "bwrap"
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "/sys/fs/cgroup"
	}
	if cfg.HostUID == 0 {
		cfg.HostUID = engine.DefaultHostUID
	}
	b := &Engine{cfg: cfg, logger: logger, host: thisHost(), fs: rootFS{root: cfg.Root}}
	if cfg.Root == "" {
		b.fs.etc = engine.HostEtc()
	}
	b.spares = spare.New[launchKey](spare.Config[*launcher]{
		Size: cfg.Spares, Discard: (*launcher).discard,
		Failed: func(err error) { logger.Warn("could not prepare a spare sandbox launcher", "error", err) },
	})
	b.forkSpares = spare.New[forkSpareKey](spare.Config[*forkSpare]{
		Size: cfg.Spares, Delay: forkSpareDelay, Discard: (*forkSpare).discard,
		Failed: func(err error) { logger.Debug("could not prepare a spare sandbox from the fork server", "error", err) },
	})
	b.lookErr = b.lookPaths()
	var err error
	if b.seccomp, err = seccomp.Filter(); err != nil {
		return nil, err
	}
	if b.seccomp == nil {
		logger.Warn("no seccomp filter for this architecture: sandboxes rely on namespaces, capabilities and no_new_privs alone")
	}

	cg, err := cgroup.NewManager(cfg.CgroupRoot, logger)
	if err != nil {
		logger.Warn("cgroups unavailable: memory and pids are capped with rlimits only", "error", err)
	} else {
		b.cgroups = cg
	}
	return b, nil
}

func (b *Engine) lookPaths() error {
	var err error
	if b.bwrap, err = engine.LookPath(b.cfg.Path); err != nil {
		return fmt.Errorf("%w: bubblewrap (bwrap) is not installed: run `apt-get install bubblewrap` (Debian/Ubuntu) or `dnf install bubblewrap`", engine.ErrUnavailable)
	}
	if b.sh, err = exec.LookPath("/bin/sh"); err != nil {
		return fmt.Errorf("%w: /bin/sh is missing", engine.ErrUnavailable)
	}
	if b.dropRoot = os.Geteuid() == 0; b.dropRoot {
		if b.setpriv, err = engine.LookPath("setpriv"); err != nil {
			return fmt.Errorf("%w: setpriv is not installed: run `apt-get install util-linux` (Debian/Ubuntu) or `dnf install util-linux`", engine.ErrUnavailable)
		}
		if err := engine.CheckHostUID(b.cfg.HostUID); err != nil {
			return fmt.Errorf("%w: %w", engine.ErrUnavailable, err)
		}
		if b.mount, err = engine.LookPath("mount"); err != nil {
			return fmt.Errorf("%w: mount is not installed: run `apt-get install mount` (Debian/Ubuntu) or `dnf install util-linux`", engine.ErrUnavailable)
		}
		if b.scratch, err = makeScratch(); err != nil {
			return fmt.Errorf("%w: %w", engine.ErrUnavailable, err)
		}
	}
	// The sandbox's own: the environment's, or the host's /usr.
	if _, err := os.Stat(filepath.Join(b.cfg.Root, prlimitPath)); err != nil {
		return fmt.Errorf("%w: %s is missing in the sandbox's root file system, and with it each sandbox takes its share of the queued-signals and locked-memory limits: install util-linux (apt-get install util-linux), in the environment too", engine.ErrUnavailable, prlimitPath)
	}
	return nil
}

// Name implements engine.Engine.
func (b *Engine) Name() string { return "bwrap" }

// Prepare implements engine.Engine: it compiles the agent in agentDir with the
// host's python, which bwrap sandboxes run (they bind the host's /usr).
// A fork server started later imports the agent from agentDir (one already
// running keeps its own).
func (b *Engine) Prepare(ctx context.Context, agentDir, python string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	if b.fs.root == "" {
		err = agent.Precompile(ctx, python, agentDir)
	} else {
		err = agent.PrecompileWith(ctx, b.inRoot(python, agentDir), agentDir, engine.AgentMount)
	}
	if resolved, rerr := filepath.EvalSymlinks(agentDir); rerr == nil {
		b.mu.Lock()
		b.python, b.agentDir = python, resolved
		b.mu.Unlock()
	}
	return err
}

// inRoot runs the environment's python in a plain bwrap sandbox of the
// environment with agentDir writable at engine.AgentMount: the agent is
// compiled by the interpreter that runs it, whose version the host's may
// not be.
func (b *Engine) inRoot(python, agentDir string) agent.Runner {
	return func(ctx context.Context, args []string) error {
		if b.lookErr != nil {
			return b.lookErr
		}
		argv := []string{"--unshare-all", "--die-with-parent", "--ro-bind", b.fs.root, "/",
			"--bind", agentDir, engine.AgentMount, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--clearenv", python}
		cmd := exec.CommandContext(ctx, b.bwrap, append(argv, args...)...)
		cmd.Env = []string{}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s in %s: %w: %s", python, b.fs.root, err, out)
		}
		return nil
	}
}

// Start implements engine.Engine. ctx bounds only the start. It forks the
// sandbox from the fork server when one runs (for a warm spec, also when
// one is starting: it waits for it); else it takes a spare launcher when
// one matches spec, and then makes sure spares are refilled. A start whose
// ctx ends while it waits for the server starts nothing.
func (b *Engine) Start(ctx context.Context, spec engine.Spec) (engine.Process, error) {
	if b.lookErr != nil {
		return nil, b.lookErr
	}
	plan, err := b.plan(ctx, spec)
	if err != nil {
		return nil, err
	}
	if b.cfg.ForkServer {
		srv, err := (*forkserver.Server)(nil), plan.unforkable
		if err == nil {
			srv, err = b.forkServer(ctx, spec)
		}
		if err == nil {
			if p := b.startForkSpare(ctx, srv, plan); p != nil {
				b.refillForkSpares(srv, plan)
				return p, nil
			}
			var p *process
			if p, err = b.startForked(ctx, srv, plan); err == nil {
				b.refillForkSpares(srv, plan)
				return p, nil
			}
			plan.logger.Warn("fork server could not start the sandbox; starting it with bwrap", "error", err)
		}
		if b.cfg.forkOnly {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err() // its caller has given up: a sandbox started now would go unused
		}
	}
	if b.cfg.Spares > 0 {
		defer b.refillSpares(plan)
		if p := b.startSpare(plan); p != nil {
			return p, nil
		}
	}
	p, err := b.startFresh(plan)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return p, nil
}

// CheckLimits reports limits that no sandbox could get from this process
// (engine.Engine), and says once at start when only bwrap's path can give
// them.
func (b *Engine) CheckLimits(lim engine.Limits) error {
	if err := b.host.check(nsRlimits(lim)); err != nil {
		return err
	}
	limits := b.rlimitsFor(lim)
	if err := b.host.check(limits); err != nil {
		return err
	}
	if err := b.host.forked().check(limits); err != nil && b.cfg.ForkServer {
		b.logger.Warn("sandboxes start with bwrap, not from the fork server, which cannot give them these limits", "error", err)
	}
	return nil
}

// rlimitsFor are the rlimits of a sandbox with lim: where there are
// cgroups, they cap memory and pids instead.
func (b *Engine) rlimitsFor(lim engine.Limits) []rlimit {
	return rlimits(lim, b.cgroups != nil, b.cgroups != nil)
}

// startPlan is everything the engine needs to start one sandbox.
type startPlan struct {
	spec engine.Spec
	argv []string
	data []byte
	key  launchKey
	// unforkable says why the fork server cannot give spec its rlimits:
	// its sandboxes set them inside its user namespace, where no
	// capability passes a hard limit. bwrap's path, whose rlimits sandboxd
	// sets, still can.
	unforkable error
	logger     *slog.Logger
}

// plan checks spec and works out the shim's command line and --args data.
func (b *Engine) plan(ctx context.Context, spec engine.Spec) (*startPlan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := engine.ValidateSpec(spec, "\x00", "NUL"); err != nil {
		return nil, err
	}
	if spec.AgentDir != "" && b.dropRoot {
		if err := readableByNobody(spec.AgentDir, b.cfg.HostUID); err != nil {
			return nil, fmt.Errorf("start sandbox %s: %w", spec.ID, err)
		}
	}
	if b.live.Closed() {
		return nil, engine.ErrClosed
	}
	limits := b.rlimitsFor(spec.Limits)
	if err := b.host.check(limits); err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w", spec.ID, err)
	}
	var unforkable error
	if b.host.canRaise { // else the check above was the fork server's too
		unforkable = b.host.forked().check(limits)
	}
	argv, data := shimArgv(b.shim(), spec)
	return &startPlan{spec: spec, argv: argv, data: data, key: newLaunchKey(argv, spec.Limits),
		unforkable: unforkable, logger: b.logger.With("sandbox.id", spec.ID)}, nil
}

func (b *Engine) start(ctx context.Context, spec engine.Spec) (*process, error) {
	plan, err := b.plan(ctx, spec)
	if err != nil {
		return nil, err
	}
	return b.startFresh(plan)
}

// startFresh starts a sandbox without a spare.
func (b *Engine) startFresh(plan *startPlan) (*process, error) {
	l, err := b.launch(plan, plan.spec.ID)
	if err != nil {
		return nil, err
	}
	p, err := l.release(plan.data, plan.logger)
	if err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w", plan.spec.ID, err)
	}
	if err := b.track(p); err != nil {
		return nil, err
	}
	return p, nil
}

// launch makes the cgroup (named after id) and a launcher for plan.
func (b *Engine) launch(plan *startPlan, id string) (*launcher, error) {
	var cg *cgroup.Group
	if b.cgroups != nil {
		var err error
		if cg, err = b.cgroups.Create(id, plan.spec.Limits); err != nil {
			return nil, fmt.Errorf("start sandbox %s: %w", plan.spec.ID, err)
		}
	}
	l, err := launch(plan.argv, b.seccomp, cg, rlimits(plan.spec.Limits, cg.HasMemory(), cg.HasPids()), b.scratch != nil)
	if err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w", plan.spec.ID, err)
	}
	return l, nil
}

// track adds p to the live sandboxes until it exits. If the engine was
// closed meanwhile, Close has missed p: track kills it and says so.
func (b *Engine) track(p *process) error {
	if !b.live.Add(p) {
		_ = p.Kill()
		_ = p.Wait()
		return engine.ErrClosed
	}
	return nil
}

// shim is what sandboxes' host command lines are made of here.
func (b *Engine) shim() shim {
	c := shim{sh: b.sh, setpriv: b.setpriv, bwrap: b.bwrap, fs: b.fs, mount: b.mount, hostUID: b.cfg.HostUID, seccomp: b.seccomp != nil}
	if b.scratch != nil {
		c.scratch = b.scratch.Path
	}
	return c
}

// makeScratch makes the directory under which each shim mounts its
// sandbox's tmpfs, in its own mount namespace: on the host it stays empty.
func makeScratch() (*tempdir.Dir, error) {
	d, err := tempdir.Make("", "codeexec-scratch-")
	if err != nil {
		return nil, fmt.Errorf("scratch mount points: %w", err)
	}
	for _, m := range scratchMounts(engine.Limits{}) {
		if err := os.Mkdir(filepath.Join(d.Path, m.name), 0o755); err != nil {
			_ = d.Remove()
			return nil, fmt.Errorf("scratch mount points: %w", err)
		}
	}
	// bwrap, as the sandbox uid, binds them.
	if err := os.Chmod(d.Path, 0o755); err != nil {
		_ = d.Remove()
		return nil, fmt.Errorf("scratch mount points: %w", err)
	}
	return d, nil
}

// readableByNobody checks that Config.HostUID, which bwrap runs as when
// sandboxd is root, can bind dir: "others" may search every directory on
// the way and read dir. Without this, bwrap fails inside the sandbox with
// a terse "Can't find source path".
func readableByNobody(dir string, uid int) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("agent dir: %w", err)
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("agent dir: %w", err)
		}
		need := os.FileMode(0o001) // search
		if p == abs {
			need = 0o005 // read and search
		}
		if fi.Mode().Perm()&need != need {
			return fmt.Errorf("agent dir %s: %s is %v; the sandbox runs as uid %d and needs o+%s on it (chmod o+rx)",
				abs, p, fi.Mode().Perm(), uid, map[os.FileMode]string{1: "x", 5: "rx"}[need])
		}
		if p == "/" {
			return nil
		}
	}
}

// Close implements engine.Engine: it stops the fork server, discards the
// spare launchers, kills every live sandbox, waits for them and removes the
// cgroup parents.
func (b *Engine) Close() error {
	b.mu.Lock()
	live, first := b.live.Close()
	forks := b.forks
	b.mu.Unlock()
	if !first {
		return nil
	}
	// A launcher or spare sandbox being made now is discarded.
	spares, forkSpares := b.spares.Close(), b.forkSpares.Close()
	discardForkSpares(forkSpares)
	if forks != nil {
		forks.Close() // a trial sandbox it starts now is killed (track)
	}
	for _, l := range spares {
		l.discard()
	}
	for _, p := range live {
		_ = p.Kill()
	}
	for _, p := range live {
		_ = p.Wait()
	}
	if b.scratch != nil {
		_ = b.scratch.Remove()
	}
	if b.cgroups == nil {
		return nil
	}
	if err := b.cgroups.Close(); err != nil {
		return fmt.Errorf("close bwrap engine: %w", err)
	}
	return nil
}
