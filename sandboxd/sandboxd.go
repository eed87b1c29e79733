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
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/bwrap"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/container"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/detect"
	"github.com/codeexec/codeexec/sandboxd/internal/lease"
	"github.com/codeexec/codeexec/sandboxd/internal/metrics"
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
	// Python is the interpreter path inside the sandbox (for podman and
	// docker: inside the image).
	Python string
	// Image is the image the podman and docker engines run.
	Image string
	// ContainerUser is uid:gid inside containers.
	ContainerUser string
	// RuntimeArgs are extra `run` arguments for podman and docker, e.g.
	// --runtime=runsc for gVisor.
	RuntimeArgs []string
	// AgentRoot is where the agent's files are written (a fresh directory
	// below it per sandboxd); default the system temp dir. When sandboxd
	// itself runs in a container and starts sandboxes through the host's
	// engine socket, the engine resolves bind-mount sources on the host, so
	// this must be a host directory mounted at the same path.
	AgentRoot string

	// Limits bound each sandbox: memory, pids, CPU, the /tmp and
	// /workspace sizes, file size, open files (see Limits).
	Limits
	// OutputLimitBytes caps each output stream per call.
	OutputLimitBytes int64

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
	// Advertise is where gateways reach this replica's SandboxService when
	// another replica finds a session live here: host:port, or unix:/path.
	Advertise string

	// ToolErrors is what a failed tool call does in the sandbox: "raise"
	// (or "") raises runtime.ToolError; "return" returns the failed
	// CallToolResult as a dict, as upstream did, for code written for it.
	ToolErrors string
}

// Limits bound one sandbox. Its fields are engine.Limits' (in
// internal/engine, which documents how each engine applies them):
// MemoryBytes, Pids, CPUs (cores), CPUTime, TmpBytes, WorkspaceBytes,
// FileBytes (one written file) and OpenFiles. A zero means no cap, but
// for OpenFiles (0 is 1024) and the two tmpfs sizes (0 leaves the tmpfs
// unsized: the kernel's default, half of RAM).
type Limits = engine.Limits

// DefaultOpenFiles is the descriptor cap of a sandbox whose Limits leave
// OpenFiles 0.
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

// withOpenFiles gives lim the default descriptor cap when it has none.
func withOpenFiles(lim Limits) Limits {
	if lim.OpenFiles == 0 {
		lim.OpenFiles = DefaultOpenFiles
	}
	return lim
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
		Image:         "python:3.14-slim",
		ContainerUser: "65534:65534",
		Limits: Limits{
			MemoryBytes: 512 << 20, Pids: 128,
			TmpBytes: 64 << 20, WorkspaceBytes: 128 << 20, // OpenFiles 0: DefaultOpenFiles
		},
		OutputLimitBytes: 256 << 10,
		DefaultTimeout:   30 * time.Second,
		MaxTimeout:       time.Hour,
		StartTimeout:     30 * time.Second,
		IdleTimeout:      30 * time.Minute,
		PoolSize:         2,
		LaunchSpares:     2,
		ForkServer:       true,
		MaxSessions:      64,
		SessionTTL:       7 * 24 * time.Hour,
		CheckpointBytes:  session.DefaultCheckpointBytes,
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
	case (c.Runtime == "podman" || c.Runtime == "docker") && c.Image == "":
		return fmt.Errorf("the %s runtime needs an image: set MCP_BRIDGE_IMAGE (--image), e.g. localhost/codeexec-sandbox:latest from deploy/build-images.sh", c.Runtime)
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
	case c.PoolSize < 0 || c.PoolSize > 64:
		return fmt.Errorf("warm pool size %d is out of range: set CODEEXEC_POOL_SIZE (--pool) to 0 to 64", c.PoolSize)
	case c.LaunchSpares < 0 || c.LaunchSpares > 16:
		return fmt.Errorf("launch spares %d is out of range: set CODEEXEC_LAUNCH_SPARES (--launch-spares) to 0 to 16", c.LaunchSpares)
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
	m        *session.Manager
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
	eng, err := detect.Engine(ctx, cfg.Runtime, bwrap.Config{Spares: cfg.LaunchSpares, ForkServer: cfg.ForkServer}, container.Config{
		Image:     cfg.Image,
		User:      cfg.ContainerUser,
		ExtraArgs: cfg.RuntimeArgs,
		CheckArgv: []string{cfg.Python, "-c", "pass"},
		Limits:    withOpenFiles(cfg.Limits),
	}, logger)
	if err != nil {
		return nil, err
	}
	lim := withOpenFiles(cfg.Limits)
	if err := eng.CheckLimits(lim); err != nil {
		_ = eng.Close()
		return nil, fmt.Errorf("%s sandboxes: %w", eng.Name(), err)
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
	var dur *session.Durability
	if deps.Sessions != nil {
		replica := lease.NewReplica(deps.Sessions, cfg.Advertise, logger)
		dur = &session.Durability{
			Store:           lease.NewStore(deps.Sessions, replica, cfg.SessionTTL),
			CheckpointBytes: cfg.CheckpointBytes,
		}
		logger.Info("sessions are durable", "replica", replica.ID, "advertise", cfg.Advertise, "session_ttl", cfg.SessionTTL)
	}
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
		},
		Limits:         lim,
		OutputLimit:    cfg.OutputLimitBytes,
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
	return &Service{m: m, eng: eng, agentDir: agentDir, logger: logger}, nil
}

// Register adds SandboxService to g.
func (s *Service) Register(g *grpc.Server) {
	server.Register(g, s.m, s.logger)
}

// Close stops every session and sandbox and removes the agent files.
func (s *Service) Close() error {
	s.m.Close()
	err := s.eng.Close()
	return errors.Join(err, s.agentDir.Remove())
}
