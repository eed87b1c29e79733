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
	"maps"
	"path/filepath"
	"slices"
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
	// ContainerUser is who every container sandbox runs as (uid[:gid] or
	// name[:group]); "" gives each a host uid of its own from
	// ContainerUIDs, so that none shares the per-user kernel counts.
	ContainerUser string
	// ContainerUIDs is that range, FIRST-LAST (container.ParseUIDRange);
	// "" is container.DefaultFirstUID's.
	ContainerUIDs string
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
	// unless marked writable (engine.ParseMount reads them); TenantMounts
	// are more, in the sandboxes of one tenant only, by tenant.
	Mounts       []Mount
	TenantMounts map[string][]Mount

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
// of protected on the host (the state dir): the operator's, and each
// tenant's beside them.
func CheckMounts(mounts []Mount, tenants map[string][]Mount, protected ...string) error {
	if err := engine.CheckMounts(mounts, protected...); err != nil {
		return err
	}
	var errs []error
	for _, t := range slices.Sorted(maps.Keys(tenants)) {
		if err := engine.CheckMounts(append(slices.Clip(mounts), tenants[t]...), protected...); err != nil {
			errs = append(errs, fmt.Errorf("tenant %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
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
		TenantMounts:   cfg.TenantMounts,
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
	var first, count int // zero: the default range
	if cfg.ContainerUIDs != "" {
		if first, count, err = container.ParseUIDRange(cfg.ContainerUIDs); err != nil {
			return nil, err
		}
	}
	eng, err := detect.Engine(ctx, cfg.Runtime, bcfg, container.Config{
		Image:    image,
		User:     cfg.ContainerUser,
		FirstUID: first, UIDCount: count,
		FilesDir:  cfg.AgentRoot,
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
