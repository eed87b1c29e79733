// Package sandboxd is the sandbox service: it runs Python in isolated,
// persistent sessions and brokers the sandbox's requests to discoveryd and
// memoryd. Details live under sandboxd/internal: server (the gRPC
// handlers), session (sessions and the sequence of a call), sandbox (one
// live sandbox: exec, restore, output, calls), lease (a session's hold on
// the session store: fencing, checkpoints, takeover), capacity (the warm
// pool, --max-sessions, idle reaping), engine (the runtimes: bwrap, podman
// and docker, chosen by engine/detect), channel and broker (the framed
// channel to the in-sandbox agent and the requests it carries), and agent
// (the Python that runs in the sandbox). Other
// services reach sandboxd only through the generated gRPC client.
package sandboxd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
	"github.com/codeexec/codeexec/sandboxd/internal/agent"
	"github.com/codeexec/codeexec/sandboxd/internal/broker"
	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/bwrap"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/container"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/detect"
	"github.com/codeexec/codeexec/sandboxd/internal/environment"
	"github.com/codeexec/codeexec/sandboxd/internal/lease"
	"github.com/codeexec/codeexec/sandboxd/internal/metrics"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
	"github.com/codeexec/codeexec/sandboxd/internal/server"
	"github.com/codeexec/codeexec/sandboxd/internal/session"
	"github.com/codeexec/codeexec/sandboxd/internal/tempdir"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Config configures sandboxd. Defaults follow upstream's MCP_BRIDGE_* values.
type Config struct {
	// Runtime selects the engine: "bwrap", "podman", "docker", or "" to
	// detect one (bwrap, then podman, then docker).
	Runtime string
	// Env names the environment sandboxes run in (package environment):
	// "" is the default one when it is built, else the host's /usr;
	// "host" is always the host's /usr.
	Env string
	// EnvDir is where environments are kept ("" is
	// /var/lib/codeexec/environments).
	EnvDir string
	// Python is the interpreter path inside the sandbox (for podman and
	// docker: inside the image; in an environment: inside its tree).
	Python string
	// Image is the image the podman and docker engines run; "" is the
	// environment's (imported from its tree), or on the host's /usr
	// upstream's python:3.14-slim.
	Image string
	// ContainerUser is uid:gid inside containers.
	ContainerUser string
	// RuntimeArgs are extra `run` arguments for podman and docker, e.g.
	// --runtime=runsc for gVisor.
	RuntimeArgs []string
	// SandboxUID is the host uid bwrap sandboxes and the fork server run
	// as when sandboxd is root; it owns their user namespaces, and the
	// kernel charges to it what they make. Nothing else may use it. 0 is
	// engine.DefaultHostUID.
	SandboxUID int
	// AgentRoot is where the agent's files are written (a fresh directory
	// below it per sandboxd); default the system temp dir. When sandboxd
	// itself runs in a container and starts sandboxes through the host's
	// engine socket, the engine resolves bind-mount sources on the host, so
	// this must be a host directory mounted at the same path.
	AgentRoot string

	// Limits bound each sandbox: memory, pids, CPU, the /tmp and
	// /workspace sizes, file size, open files (see Limits).
	Limits
	// OutputLimitBytes caps each output stream per call, when
	// OutputBudget is zero.
	OutputLimitBytes int64
	// OutputBudget bounds the characters of output a call sends back (its
	// head, and the tail of each stream), the whole of a stream over it
	// kept in a file in the session's workspace; zero uses
	// OutputLimitBytes instead.
	OutputBudget int
	// Images bound the images a call shows (display(), figures).
	Images ImageLimits
	// Mounts are host directories exposed in every sandbox, read-only
	// unless marked writable (engine.ParseMount reads them).
	Mounts []Mount

	DefaultTimeout time.Duration
	MaxTimeout     time.Duration
	StartTimeout   time.Duration
	IdleTimeout    time.Duration
	PoolSize       int
	// LaunchSpares is how many sandboxes are kept set up for the next
	// ones: the fork server's spares, or bwrap launchers (started,
	// confined, held at their gate) while it is not running; see
	// bwrap.Config.Spares.
	LaunchSpares int
	// ForkServer starts bwrap sandboxes from a fork server, which has the
	// interpreter started and the agent imported (bwrap.Config.ForkServer);
	// sandboxes start with bwrap itself while it is not running.
	ForkServer bool
	// MaxSessions caps live sessions; with a session store (durable
	// sessions) it caps live sandboxes instead.
	MaxSessions int

	// SessionTTL is how long a durable session unused is kept, its
	// checkpoint with it.
	SessionTTL time.Duration
	// CheckpointBytes caps one session checkpoint; over it the session is
	// reported as not durable.
	CheckpointBytes int64
	// WorkspaceCheckpointBytes caps the files of /workspace a checkpoint
	// holds, on top of CheckpointBytes; files over it are named in the
	// result and the restore notice, not kept. Zero keeps no files.
	WorkspaceCheckpointBytes int64
	// Advertise is where gateways reach this replica's SandboxService when
	// another replica finds a session live here: host:port, or unix:/path.
	Advertise string

	// ToolErrors is what a failed tool call does in the sandbox: "raise"
	// (or "") raises runtime.ToolError; "return" returns the failed
	// CallToolResult as a dict, as upstream did, for code written for it.
	ToolErrors string
}

// Mount is a host directory exposed in every sandbox (engine.Mount).
type Mount = engine.Mount

// ParseMount reads HOST_DIR[:SANDBOX_DIR][:rw|:ro], as --mount takes it.
func ParseMount(spec string) (Mount, error) { return engine.ParseMount(spec) }

// CheckMounts refuses mounts that overlap in the sandbox or overlap one
// of protected on the host (the state dir).
func CheckMounts(mounts []Mount, protected ...string) error {
	return engine.CheckMounts(mounts, protected...)
}

// ImageLimits bound the images of one call: the longest side in pixels,
// the bytes of one encoded image, and the bytes and count of one call's.
type ImageLimits struct {
	Side             int
	Bytes, CallBytes int64
	PerCall          int
}

// Limits bound one sandbox. Its fields are engine.Limits' (in
// internal/engine, which documents how each engine applies them):
// MemoryBytes, Pids, CPUs (cores), CPUTime, TmpBytes, WorkspaceBytes,
// FileBytes (one written file) and OpenFiles. A zero means no cap, but
// for OpenFiles (0 is 1024) and the two tmpfs sizes (0 leaves the tmpfs
// unsized: the kernel's default, half of RAM).
type Limits = engine.Limits

// DefaultOpenFiles is the descriptor cap of a sandbox whose Limits leave
// OpenFiles 0, unless the host's file table cannot hold that many for
// every sandbox (shareOut).
const DefaultOpenFiles = 1024

// The narrowest caps accepted: the agent holds about a dozen descriptors
// while a call runs (the channel, the call's output pipes, Python's own),
// which leaves user code twenty at 32; a file-size cap below 64 KiB is
// more likely a size given without its unit than meant.
const (
	minOpenFiles = 32
	minFileBytes = 64 << 10
	// maxOpenFiles is the kernel's default ceiling (fs.nr_open): above
	// it, every start fails on a host that keeps the default.
	maxOpenFiles = 1 << 20
)

// sandboxCount is how many sandboxes may run code at once, or 0 for no
// cap: the live sessions and the warm pool's.
func sandboxCount(c Config) int {
	if c.MaxSessions == 0 {
		return 0
	}
	return c.MaxSessions + c.PoolSize
}

// negativeLimit reports the first limit other than memory and pids (whose
// floors Validate checks) below zero, saying how to set it.
func negativeLimit(lim Limits) error {
	switch {
	case lim.CPUs < 0:
		return fmt.Errorf("CPU limit %g is negative: set MCP_BRIDGE_CPUS (--cpus) to a number of cores, e.g. 0.5, or to 0 for no cap", lim.CPUs)
	case lim.CPUTime < 0:
		return fmt.Errorf("CPU time limit %s is negative: set CODEEXEC_CPU_TIME (--cpu-time) to a duration, e.g. 10m, or to 0 for no cap", lim.CPUTime)
	case lim.TmpBytes < 0:
		return fmt.Errorf("/tmp size %d bytes is negative: set CODEEXEC_TMP_SIZE (--tmp-size) to a size, e.g. 64m", lim.TmpBytes)
	case lim.WorkspaceBytes < 0:
		return fmt.Errorf("/workspace size %d bytes is negative: set CODEEXEC_WORKSPACE_SIZE (--workspace-size) to a size, e.g. 128m", lim.WorkspaceBytes)
	case lim.FileBytes < 0:
		return fmt.Errorf("file size limit %d bytes is negative: set CODEEXEC_FILE_SIZE (--file-size) to a size, e.g. 16m, or to 0 for no cap", lim.FileBytes)
	case lim.OpenFiles < 0:
		return fmt.Errorf("open files limit %d is negative: set CODEEXEC_OPEN_FILES (--open-files) to a count, e.g. %d", lim.OpenFiles, DefaultOpenFiles)
	}
	return nil
}

// narrowLimit reports a file-size or open-files cap outside what a
// sandbox can start and work with.
func narrowLimit(lim Limits) error {
	switch {
	case lim.FileBytes > 0 && lim.FileBytes < minFileBytes:
		return fmt.Errorf("file size limit %d bytes is too small: set CODEEXEC_FILE_SIZE (--file-size) to at least 64k, with its unit (e.g. 16m), or to 0 for no cap", lim.FileBytes)
	case lim.OpenFiles > 0 && lim.OpenFiles < minOpenFiles:
		return fmt.Errorf("open files limit %d is too small: set CODEEXEC_OPEN_FILES (--open-files) to at least %d (the agent holds about a dozen of them itself), e.g. %d", lim.OpenFiles, minOpenFiles, DefaultOpenFiles)
	case lim.OpenFiles > maxOpenFiles:
		return fmt.Errorf("open files limit %d is too large: set CODEEXEC_OPEN_FILES (--open-files) to at most %d (the kernel's default fs.nr_open), e.g. %d", lim.OpenFiles, maxOpenFiles, DefaultOpenFiles)
	}
	return nil
}

// DefaultConfig returns upstream's defaults.
func DefaultConfig() Config {
	return Config{
		Python:        "/usr/bin/python3",
		ContainerUser: "65534:65534",
		Limits: Limits{
			MemoryBytes: 512 << 20, Pids: 128,
			TmpBytes: 64 << 20, WorkspaceBytes: 128 << 20, // OpenFiles 0: DefaultOpenFiles
		},
		OutputLimitBytes: 256 << 10,
		// About 10k tokens: the size of result Claude Code warns about
		// (it cuts at 25k), and a tenth of a 100k-token context.
		OutputBudget: 40000,
		// Claude scales down any image whose long side is over 1568 px
		// (so more pixels cost latency and no quality), and refuses over
		// 2000 px once a request holds 20 images. Claude Desktop refuses
		// a result over 1 MiB of JSON: 640 KiB of images is 853 KiB in
		// base64, which leaves room for the 40k characters of text.
		Images:          ImageLimits{Side: 1568, Bytes: 512 << 10, CallBytes: 640 << 10, PerCall: 10},
		DefaultTimeout:  30 * time.Second,
		MaxTimeout:      time.Hour,
		StartTimeout:    30 * time.Second,
		IdleTimeout:     30 * time.Minute,
		PoolSize:        2,
		LaunchSpares:    2,
		ForkServer:      true,
		SandboxUID:      engine.DefaultHostUID,
		MaxSessions:     64,
		SessionTTL:      7 * 24 * time.Hour,
		CheckpointBytes: session.DefaultCheckpointBytes,
		// The default /workspace: all of it fits, and restoring that
		// much stays around a second (docs/PERFORMANCE.md).
		WorkspaceCheckpointBytes: 128 << 20,
	}
}

// Validate reports the first bad setting, saying what is accepted.
func (c Config) Validate() error {
	if err := negativeLimit(c.Limits); err != nil {
		return err
	}
	if err := narrowLimit(c.Limits); err != nil {
		return err
	}
	switch {
	case c.ToolErrors != "" && c.ToolErrors != "raise" && c.ToolErrors != "return":
		return fmt.Errorf("tool errors %q: use \"raise\" (a failed tool call raises runtime.ToolError) or \"return\" (it returns the result dict, as upstream did)", c.ToolErrors)
	case c.Runtime != "" && c.Runtime != "bwrap" && c.Runtime != "podman" && c.Runtime != "docker":
		return fmt.Errorf("runtime %q is not supported: use bwrap, podman or docker, or leave it empty to detect one", c.Runtime)
	case (c.Runtime == "podman" || c.Runtime == "docker") && c.Image == "" && c.Env == environment.Host:
		return fmt.Errorf("the %s runtime needs an image on the host's /usr (--env host): set MCP_BRIDGE_IMAGE (--image), e.g. localhost/codeexec-sandbox:latest from deploy/build-images.sh, or run in an environment (--env NAME), whose image is made from its tree", c.Runtime)
	case c.Env != "" && c.Env != environment.Host && environment.CheckName(c.Env) != nil:
		return fmt.Errorf("--env (CODEEXEC_ENV): %w", environment.CheckName(c.Env))
	case c.Python == "":
		return errors.New("python path is empty: set CODEEXEC_PYTHON (--python) to the interpreter inside the sandbox, e.g. /usr/bin/python3")
	case c.MemoryBytes < 0 || (c.MemoryBytes > 0 && c.MemoryBytes < 32<<20):
		return fmt.Errorf("memory limit %d bytes is too small: set MCP_BRIDGE_MEMORY (--memory) to at least 32m, with its unit (e.g. 512m), or to 0 for no cap (Python needs about 10 MiB to start)", c.MemoryBytes)
	case c.Pids < 0 || (c.Pids > 0 && c.Pids < 8):
		return fmt.Errorf("pids limit %d is too small: set MCP_BRIDGE_PIDS (--pids) to at least 8 (the agent needs a few threads), or to 0 for no cap", c.Pids)
	case c.DefaultTimeout < time.Second:
		return fmt.Errorf("default timeout %s is too short: set MCP_BRIDGE_TIMEOUT (--timeout) to at least 1s, e.g. 30s", c.DefaultTimeout)
	case c.MaxTimeout < time.Second:
		return fmt.Errorf("max timeout %s is too short: set MCP_BRIDGE_MAX_TIMEOUT (--max-timeout) to at least 1s, e.g. 120s", c.MaxTimeout)
	case c.OutputLimitBytes < 0:
		return fmt.Errorf("output limit %d bytes is negative: set CODEEXEC_OUTPUT_LIMIT (--output-limit) to a size, e.g. 1m, or to 0 for no cap", c.OutputLimitBytes)
	case c.WorkspaceCheckpointBytes < 0 || c.WorkspaceCheckpointBytes > 1<<30:
		return fmt.Errorf("workspace checkpoint cap %d bytes is out of range: set CODEEXEC_WORKSPACE_CHECKPOINT_BYTES (--workspace-checkpoint-bytes) to 0 (files are not kept) up to 1g, with its unit, e.g. 128m", c.WorkspaceCheckpointBytes)
	case c.OutputBudget != 0 && (c.OutputBudget < 1000 || c.OutputBudget > 10_000_000):
		return fmt.Errorf("output budget %d characters is out of range: set CODEEXEC_OUTPUT_BUDGET (--output-budget) to 1000 to 10000000, or to 0 to cap output at CODEEXEC_OUTPUT_LIMIT bytes instead", c.OutputBudget)
	case c.Images.Side < 64 || c.Images.Side > 8000:
		return fmt.Errorf("image side %d px is out of range: set CODEEXEC_IMAGE_SIDE (--image-side) to 64 to 8000 (Claude refuses images over 8000 px)", c.Images.Side)
	case c.Images.Bytes < 1<<10 || c.Images.Bytes > 5<<20:
		return fmt.Errorf("image size %d bytes is out of range: set CODEEXEC_IMAGE_BYTES (--image-bytes) to 1k to 5m, with its unit (Claude refuses images over 5 MB)", c.Images.Bytes)
	case c.Images.CallBytes < c.Images.Bytes || c.Images.CallBytes > 32<<20:
		return fmt.Errorf("images per call %d bytes is out of range: set CODEEXEC_CALL_IMAGE_BYTES (--call-image-bytes) to at least --image-bytes (%d) and at most 32m", c.Images.CallBytes, c.Images.Bytes)
	case c.Images.PerCall < 1 || c.Images.PerCall > 100:
		return fmt.Errorf("images per call %d is out of range: set CODEEXEC_CALL_IMAGES (--call-images) to 1 to 100", c.Images.PerCall)
	case c.PoolSize < 0 || c.PoolSize > 64:
		return fmt.Errorf("warm pool size %d is out of range: set CODEEXEC_POOL_SIZE (--pool) to 0 to 64", c.PoolSize)
	case c.LaunchSpares < 0 || c.LaunchSpares > 16:
		return fmt.Errorf("launch spares %d is out of range: set CODEEXEC_LAUNCH_SPARES (--launch-spares) to 0 to 16", c.LaunchSpares)
	case c.SandboxUID < 0:
		return fmt.Errorf("sandbox uid %d is negative: set CODEEXEC_SANDBOX_UID (--sandbox-uid) to a host uid nothing else uses, e.g. 65533", c.SandboxUID)
	case c.MaxSessions < 0:
		return fmt.Errorf("max sessions %d is negative: set CODEEXEC_MAX_SESSIONS (--max-sessions) to the most live sandboxes, e.g. 64, or to 0 for no cap", c.MaxSessions)
	case c.SessionTTL < time.Minute:
		return fmt.Errorf("session TTL %s is too short: set CODEEXEC_SESSION_TTL (--session-ttl) to at least 1m (it is how long an unused session's handle stays valid; days are typical, e.g. 168h)", c.SessionTTL)
	case c.CheckpointBytes < 1<<20 || c.CheckpointBytes > 1<<30:
		return fmt.Errorf("checkpoint cap %d bytes is out of range: set CODEEXEC_CHECKPOINT_BYTES (--checkpoint-bytes) to 1m to 1g, with its unit, e.g. 64m", c.CheckpointBytes)
	}
	return nil
}

// Deps are the services sandboxd brokers to. A nil client leaves that
// feature out; the sandbox then gets a clear error when it asks for it.
type Deps struct {
	Discovery discoveryv1.DiscoveryServiceClient
	Memory    memoryv1.MemoryServiceClient
	Tools     memoryv1.ToolServiceClient
	// Sessions, when set, makes sessions durable: checkpointed to it after
	// each call, restored from it into a new sandbox, shared by every
	// replica that uses the same store.
	Sessions sessionstorev1.SessionStoreServiceClient
	// Registry receives sandboxd's metrics; nil leaves them unregistered.
	Registry prometheus.Registerer
}

// Service is a running sandboxd.
type Service struct {
	m *session.Manager
	// files reads the workspace files of durable sessions; nil without
	// a session store.
	files    *lease.Store
	eng      engine.Engine
	agentDir *tempdir.Dir
	logger   *slog.Logger
}

// New checks the runtime, writes the agent and starts the warm pool. ctx
// bounds the background loops; Close stops them.
func New(ctx context.Context, cfg Config, deps Deps, logger *slog.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DefaultTimeout > cfg.MaxTimeout {
		// As upstream: calls are clamped to the maximum, default included.
		logger.Warn("the default timeout is above the maximum; calls are clamped to the maximum",
			"timeout.default", cfg.DefaultTimeout, "timeout.max", cfg.MaxTimeout)
	}
	lim, err := hostShares(cfg, logger)
	if err != nil {
		return nil, err
	}
	senv, err := selectEnv(cfg, logger)
	if err != nil {
		return nil, err
	}
	eng, err := startEngine(ctx, cfg, senv, lim, logger)
	if err != nil {
		return nil, err
	}
	agentDir, err := tempdir.Make(cfg.AgentRoot, "codeexec-agent-")
	if err != nil {
		_ = eng.Close()
		return nil, fmt.Errorf("agent directory: %w", err)
	}
	dir := agentDir.Path
	// WriteTo also opens the directory to the sandbox user (0755).
	if err := agent.WriteTo(dir); err != nil {
		_ = agentDir.Remove()
		_ = eng.Close()
		return nil, fmt.Errorf("write agent: %w", err)
	}
	if err := eng.Prepare(ctx, dir, cfg.Python); err != nil {
		logger.Warn("could not precompile the sandbox agent; sandboxes will start slower",
			logkeys.Runtime, eng.Name(), logkeys.Error, err)
	}
	dur := durability(cfg, deps, senv, logger)
	m, err := session.NewManager(ctx, session.Config{
		Engine:   eng,
		Broker:   &broker.Broker{Discovery: deps.Discovery, Memory: deps.Memory, Tools: deps.Tools, Logger: logger},
		AgentDir: dir,
		Argv:     []string{cfg.Python, "-I", filepath.Join(engine.AgentMount, agent.Entry)},
		Env: map[string]string{
			"HOME": "/workspace", "PWD": "/workspace", "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "TMPDIR": "/tmp",
			"PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1",
			// Read by the agent at each tool call (codeexec_runtime).
			"MCP_BRIDGE_TOOL_ERRORS": cmp.Or(cfg.ToolErrors, "raise"),
			// Figures go to the agent's backend, whose show() sends them
			// back as images (codeexec_display); matplotlib's cache (its
			// font list) to the sandbox's own /tmp, not the checkpointed
			// /workspace.
			"MPLBACKEND": "module://codeexec_mpl", "MPLCONFIGDIR": "/tmp/matplotlib",
		},
		Limits:         lim,
		OutputLimit:    cfg.OutputLimitBytes,
		Mounts:         cfg.Mounts,
		Results:        cfg.results(),
		DefaultTimeout: cfg.DefaultTimeout,
		MaxTimeout:     cfg.MaxTimeout,
		StartTimeout:   cfg.StartTimeout,
		IdleTimeout:    cfg.IdleTimeout,
		PoolSize:       cfg.PoolSize,
		MaxSessions:    cfg.MaxSessions,
		Metrics:        metrics.New(deps.Registry),
		Durable:        dur,
	}, logger)
	if err != nil {
		_ = agentDir.Remove()
		_ = eng.Close()
		return nil, err
	}
	svc := &Service{m: m, eng: eng, agentDir: agentDir, logger: logger}
	if dur != nil {
		svc.files = dur.Store
	}
	return svc, nil
}

// durability is how sessions outlive their sandboxes: in the session
// store, when there is one; nil without.
func durability(cfg Config, deps Deps, senv *sandboxEnv, logger *slog.Logger) *session.Durability {
	if deps.Sessions == nil {
		return nil
	}
	replica := lease.NewReplica(deps.Sessions, cfg.Advertise, logger)
	logger.Info("sessions are durable", "replica", replica.ID, "advertise", cfg.Advertise, "session_ttl", cfg.SessionTTL)
	store := lease.NewStore(deps.Sessions, replica, cfg.SessionTTL)
	store.Env = senv.id // each checkpoint records its environment
	return &session.Durability{
		Store:           store,
		EnvChange:       senv.envChange,
		CheckpointBytes: cfg.CheckpointBytes,
		WorkspaceBytes:  cfg.WorkspaceCheckpointBytes,
	}
}

// results are the bounds of what a call sends back for a model.
func (c Config) results() sandbox.Results {
	return sandbox.Results{Budget: int64(c.OutputBudget), Display: channel.DisplayLimits{
		Side: int64(c.Images.Side), Bytes: c.Images.Bytes, CallBytes: c.Images.CallBytes, CallImages: int64(c.Images.PerCall),
	}}
}

// startEngine detects the runtime and makes its engine for sandboxes of
// lim in senv, refusing limits that none of them could get.
func startEngine(ctx context.Context, cfg Config, senv *sandboxEnv, lim Limits, logger *slog.Logger) (engine.Engine, error) {
	image, err := senv.image(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	bcfg := bwrap.Config{Spares: cfg.LaunchSpares, ForkServer: cfg.ForkServer, HostUID: cfg.SandboxUID}
	if senv.env != nil {
		bcfg.Root, bcfg.Preload = senv.env.Root, senv.env.Preload
	}
	eng, err := detect.Engine(ctx, cfg.Runtime, bcfg, container.Config{
		Image:     image,
		User:      cfg.ContainerUser,
		ExtraArgs: cfg.RuntimeArgs,
		CheckArgv: []string{cfg.Python, "-c", "pass"},
		Limits:    lim,
	}, logger)
	if err != nil {
		return nil, err
	}
	if err := eng.CheckLimits(lim); err != nil {
		_ = eng.Close()
		return nil, fmt.Errorf("%s sandboxes: %w", eng.Name(), err)
	}
	return eng, nil
}

// Register adds SandboxService to g.
func (s *Service) Register(g *grpc.Server) {
	var files server.Files
	if s.files != nil {
		files = s.files
	}
	server.Register(g, s.m, files, s.logger)
}

// Close stops every session and sandbox and removes the agent files.
func (s *Service) Close() error {
	s.m.Close()
	err := s.eng.Close()
	return errors.Join(err, s.agentDir.Remove())
}
