package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/cmd/codeexec/internal/localsock"
	"github.com/codeexec/codeexec/cmd/codeexec/internal/process"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/services/flagenv"
)

// sandboxdUnit is sandboxd's settings: the sandboxes, and alone, where
// discoveryd and memoryd are.
type sandboxdUnit struct {
	cfg sandboxd.Config
	cs  containerSettings
	// Alone: the addresses of discoveryd and memoryd, and how long calls
	// may finish at a stop.
	discovery, memory string
	grace             time.Duration
	// socketDir, in serve, is where this process serves its sandboxes to
	// the other codeexec processes on the state dir (serve.go).
	socketDir string
	sock      localsock.Socket
	// shutdown stops the sandboxes, once: their durable sessions are
	// given up through memoryd, so in serve it runs before the in-memory
	// server stops (serve.go).
	shutdown func()
}

func (u *sandboxdUnit) bind(fs *flagenv.Set, e cli.Env, alone bool) {
	u.cfg = sandboxd.DefaultConfig()
	bindSandbox(fs, &u.cfg, &u.cs)
	// Mounts: CODEEXEC_MOUNTS, comma-separated, then each --mount; the
	// same for tenants' mounts.
	u.cs.mounts = commaList(e.Getenv("CODEEXEC_MOUNTS"))
	fs.Var(&u.cs.mounts, "mount", "HOST_DIR[:SANDBOX_DIR][:rw]: a host directory in every sandbox, read-only unless :rw, at /mnt/<basename> by default; repeat for more (env CODEEXEC_MOUNTS, comma-separated)")
	u.cs.tenantMounts = commaList(e.Getenv("CODEEXEC_TENANT_MOUNTS"))
	fs.Var(&u.cs.tenantMounts, "tenant-mount", "TENANT=HOST_DIR[:SANDBOX_DIR][:rw]: as --mount, in that tenant's sandboxes only; repeat for more (env CODEEXEC_TENANT_MOUNTS, comma-separated)")
	if !alone {
		return // in serve, the gateway's settings give the timeouts
	}
	bindSandboxTimeouts(fs, &u.cfg)
	fs.String(&u.cfg.Advertise, "advertise", "", "host:port at which gateways reach this replica for the sessions it holds; default: --listen, with this host's first global address (else its name) for an unspecified host", "CODEEXEC_SANDBOXD_ADVERTISE")
	fs.Duration(&u.grace, "shutdown-grace", 30*time.Second, "on SIGTERM, how long running executions may finish before they are stopped", "CODEEXEC_SHUTDOWN_GRACE")
	fs.String(&u.discovery, "discovery", "", "discoveryd address; empty: no MCP servers", "CODEEXEC_DISCOVERYD_ADDR")
	fs.String(&u.memory, "memory-addr", "", "memoryd address; empty: no memory, saved tools or durable sessions", "CODEEXEC_MEMORYD_ADDR")
}

func (u *sandboxdUnit) check() error {
	u.cs.apply(&u.cfg)
	var errs []error
	u.cfg.Mounts = nil
	for _, spec := range u.cs.mounts {
		m, err := sandboxd.ParseMount(spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("--mount (CODEEXEC_MOUNTS): %w", err))
			continue
		}
		u.cfg.Mounts = append(u.cfg.Mounts, m)
	}
	u.cfg.TenantMounts = nil
	for _, spec := range u.cs.tenantMounts {
		tenant, m, err := parseTenantMount(spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("--tenant-mount (CODEEXEC_TENANT_MOUNTS): %w", err))
			continue
		}
		if u.cfg.TenantMounts == nil {
			u.cfg.TenantMounts = map[string][]sandboxd.Mount{}
		}
		u.cfg.TenantMounts[tenant] = append(u.cfg.TenantMounts[tenant], m)
	}
	if len(errs) == 0 {
		errs = append(errs, sandboxd.CheckMounts(u.cfg.Mounts, u.cfg.TenantMounts))
	}
	return errors.Join(append(errs, u.cfg.Validate())...)
}

func (u *sandboxdUnit) start(ctx context.Context, p *process.Process) error {
	deps := sandboxd.Deps{Registry: p.Registry}
	disc, err := p.Dial(u.discovery, "--discovery")
	if err != nil {
		return err
	}
	if disc != nil {
		deps.Discovery = discoveryv1.NewDiscoveryServiceClient(disc)
	}
	mem, err := p.Dial(u.memory, "--memory-addr")
	if err != nil {
		return err
	}
	if mem != nil {
		deps.Memory, deps.Tools = memoryv1.NewMemoryServiceClient(mem), memoryv1.NewToolServiceClient(mem)
		// Sessions are durable wherever memoryd is: their checkpoints live
		// beside memory and saved tools.
		deps.Sessions = sessionstorev1.NewSessionStoreServiceClient(mem)
	}
	// In serve the state dir holds the store, the tokens and the
	// sockets: no mount may show it to a sandbox.
	if err := sandboxd.CheckMounts(u.cfg.Mounts, u.cfg.TenantMounts, u.socketDir); err != nil {
		return fmt.Errorf("--mount, --tenant-mount: %w", err)
	}
	if p.InProc != nil && u.socketDir != "" {
		if err := u.sock.Prepare(u.socketDir, p.Logger); err != nil {
			return err
		}
		u.cfg.Advertise = "unix:" + u.sock.Path
	} else if u.cfg.Advertise == "" {
		u.cfg.Advertise = advertiseDefault(p.Listen)
	}
	svc, err := sandboxd.New(ctx, u.cfg, deps, p.ServiceLogger("sandboxd"))
	if err != nil {
		return err
	}
	svc.Register(p.Server.GRPC)
	u.shutdown = sync.OnceFunc(func() {
		u.sock.Stop()
		_ = svc.Close()
	})
	p.OnClose(u.shutdown)
	if p.InProc != nil && u.socketDir != "" {
		return u.sock.Serve(ctx, p, svc)
	}
	return nil
}

// advertiseDefault is where gateways reach a replica that listens on
// listen: listen itself, or for an unspecified host this host's first
// global unicast address (a container's or a pod's own), else its name.
func advertiseDefault(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen // unix:/path
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return listen
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() {
				return net.JoinHostPort(n.IP.String(), port)
			}
		}
	}
	if name, err := os.Hostname(); err == nil {
		return net.JoinHostPort(name, port)
	}
	return listen
}

func (u *sandboxdUnit) serve(ctx context.Context, p *process.Process, _ cli.Env) error {
	return p.ServeGRPC(ctx, u.grace)
}

// containerSettings are upstream's container options that sandboxd.Config
// does not hold.
type containerSettings struct {
	mounts             stringList // --mount, repeated, after CODEEXEC_MOUNTS
	tenantMounts       stringList // --tenant-mount, repeated, after CODEEXEC_TENANT_MOUNTS
	runtimeIdleTimeout time.Duration
	runtimeArgs        string     // CODEEXEC_RUNTIME_ARGS, space-separated
	runtimeArg         stringList // --runtime-arg, repeated
}

// bindSandbox binds sandboxd's settings.
func bindSandbox(fs *flagenv.Set, c *sandboxd.Config, cs *containerSettings) {
	d := sandboxd.DefaultConfig()
	fs.String(&c.Runtime, "runtime", "", "sandbox runtime: bwrap, podman or docker; empty detects one in that order", "MCP_BRIDGE_RUNTIME")
	fs.String(&c.Env, "env", "", "environment the sandboxes run in (codeexec env list); empty: \"default\" once built, else the host's /usr; \"host\": the host's /usr", "CODEEXEC_ENV")
	fs.Path(&c.EnvDir, "env-dir", "directory of the environments; default "+sandboxd.DefaultEnvDir, "CODEEXEC_ENV_DIR")
	fs.String(&c.Python, "python", d.Python, "Python interpreter inside the sandbox", "CODEEXEC_PYTHON")
	fs.Bytes(&c.MemoryBytes, "memory", d.MemoryBytes, "memory limit per sandbox, e.g. 512m", "MCP_BRIDGE_MEMORY")
	fs.Int(&c.Pids, "pids", d.Pids, "process and thread limit per sandbox", "MCP_BRIDGE_PIDS")
	fs.Float(&c.CPUs, "cpus", 0, "CPU cores per sandbox, e.g. 0.5; 0 means no cap", "MCP_BRIDGE_CPUS")
	fs.Duration(&c.CPUTime, "cpu-time", d.CPUTime, "total CPU time per sandbox; 0 means no cap", "CODEEXEC_CPU_TIME")
	fs.Bytes(&c.TmpBytes, "tmp-size", d.TmpBytes, "size of the sandbox's /tmp", "CODEEXEC_TMP_SIZE")
	fs.Bytes(&c.WorkspaceBytes, "workspace-size", d.WorkspaceBytes, "size of the sandbox's /workspace", "CODEEXEC_WORKSPACE_SIZE")
	fs.Bytes(&c.FileBytes, "file-size", d.FileBytes, "largest file a sandbox may write, at least 64k, e.g. 16m; 0 means no cap but the sizes of /tmp and /workspace", "CODEEXEC_FILE_SIZE")
	fs.Int(&c.OpenFiles, "open-files", 0, fmt.Sprintf("open file descriptors per sandbox process, 32 to 1048576; 0 is %d, or fewer where the host's file table (fs.file-max) cannot hold that many for every sandbox", sandboxd.DefaultOpenFiles), "CODEEXEC_OPEN_FILES")
	fs.Bytes(&c.OutputLimitBytes, "output-limit", d.OutputLimitBytes, "bytes of stdout and of stderr kept per call when --output-budget is 0; 0 means no cap", "CODEEXEC_OUTPUT_LIMIT")
	fs.Int(&c.OutputBudget, "output-budget", d.OutputBudget, "characters of output a result carries (head and tail), the whole kept in a file in the workspace; 0 caps at --output-limit instead", "CODEEXEC_OUTPUT_BUDGET")
	fs.Int(&c.Images.Side, "image-side", d.Images.Side, "longest side in pixels of an image in a result; larger ones are scaled down", "CODEEXEC_IMAGE_SIDE")
	fs.Bytes(&c.Images.Bytes, "image-bytes", d.Images.Bytes, "largest encoded image in a result; larger ones are shrunk", "CODEEXEC_IMAGE_BYTES")
	fs.Bytes(&c.Images.CallBytes, "call-image-bytes", d.Images.CallBytes, "bytes of images in one result", "CODEEXEC_CALL_IMAGE_BYTES")
	fs.Int(&c.Images.PerCall, "call-images", d.Images.PerCall, "images in one result", "CODEEXEC_CALL_IMAGES")
	fs.Duration(&c.IdleTimeout, "idle-timeout", d.IdleTimeout, "destroy sessions idle this long; 0 never does", "CODEEXEC_IDLE_TIMEOUT")
	fs.Int(&c.PoolSize, "pool", d.PoolSize, "sandboxes kept started and ready for new sessions", "CODEEXEC_POOL_SIZE")
	fs.Int(&c.LaunchSpares, "launch-spares", d.LaunchSpares, "sandboxes kept set up and waiting for their command: the fork server's, or bwrap launchers while it is down; 0 keeps none", "CODEEXEC_LAUNCH_SPARES")
	fs.Int(&c.SandboxUID, "sandbox-uid", d.SandboxUID, "host uid of bwrap sandboxes and the fork server when codeexec runs as root; it owns their user namespaces, so nothing else may use it", "CODEEXEC_SANDBOX_UID")
	fs.Bool(&c.ForkServer, "fork-server", d.ForkServer, "fork bwrap sandboxes from a server that has Python started and the agent imported; false starts each with bwrap", "CODEEXEC_FORK_SERVER")
	fs.Int(&c.MaxSessions, "max-sessions", d.MaxSessions, "most live sandboxes; more sessions than that are kept as checkpoints and restored when used; 0 means no cap", "CODEEXEC_MAX_SESSIONS")
	fs.Duration(&c.SessionTTL, "session-ttl", d.SessionTTL, "how long an unused session's state (and its handle) is kept", "CODEEXEC_SESSION_TTL")
	fs.Bytes(&c.WorkspaceCheckpointBytes, "workspace-checkpoint-bytes", d.WorkspaceCheckpointBytes, "bytes of /workspace's files kept with a session's checkpoint; files over it are named, not kept; 0 keeps none", "CODEEXEC_WORKSPACE_CHECKPOINT_BYTES")
	fs.Bytes(&c.CheckpointBytes, "checkpoint-bytes", d.CheckpointBytes, "largest session checkpoint; a session whose state is larger is not durable until it shrinks", "CODEEXEC_CHECKPOINT_BYTES")
	c.StartTimeout = d.StartTimeout
	fs.String(&c.ToolErrors, "tool-errors", "raise", "what a failed MCP tool call does in the sandbox: raise (runtime.ToolError) or return (the result dict, as upstream did)", "MCP_BRIDGE_TOOL_ERRORS")
	fs.String(&c.Image, "image", d.Image, "container image for the podman and docker runtimes; default: the environment's, imported from its tree, or python:3.14-slim on the host's /usr", "MCP_BRIDGE_IMAGE")
	fs.String(&c.ContainerUser, "container-user", d.ContainerUser, "UID[:GID] or NAME[:GROUP] every container sandbox runs as, root refused; empty (the default) gives each sandbox a host uid of its own from --container-uids, so that none shares the kernel's per-user counts", "MCP_BRIDGE_CONTAINER_USER")
	fs.String(&c.ContainerUIDs, "container-uids", d.ContainerUIDs, "FIRST-LAST: the host uids container sandboxes take one each of, with --container-user empty; nothing else on the host may use them (accounts, /etc/subuid ranges)", "CODEEXEC_CONTAINER_UIDS")
	bindContainers(fs, c, cs)
	fs.Duration(&cs.runtimeIdleTimeout, "runtime-idle-timeout", 300*time.Second, "upstream's podman-machine idle stop (macOS/Windows); accepted for compatibility", "MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT")
}

// bindSandboxTimeouts binds the timeouts for sandboxd running alone; with
// the gateway in the same process they come from bindGateway.
func bindSandboxTimeouts(fs *flagenv.Set, c *sandboxd.Config) {
	d := sandboxd.DefaultConfig()
	fs.Duration(&c.DefaultTimeout, "timeout", d.DefaultTimeout, "default run_python timeout", "MCP_BRIDGE_TIMEOUT")
	fs.Duration(&c.MaxTimeout, "max-timeout", d.MaxTimeout, "largest run_python timeout", "MCP_BRIDGE_MAX_TIMEOUT")
}

// bindContainers binds the podman and docker settings that upstream does
// not have. Call cs.apply after parsing.
func bindContainers(fs *flagenv.Set, c *sandboxd.Config, cs *containerSettings) {
	fs.String(&cs.runtimeArgs, "runtime-args", "", "extra arguments for `podman run` / `docker run`, space-separated, e.g. --runtime=runsc for gVisor", "CODEEXEC_RUNTIME_ARGS")
	fs.Var(&cs.runtimeArg, "runtime-arg", "one extra argument for `podman run` / `docker run`; repeat for more (added after --runtime-args)")
	fs.Path(&c.AgentRoot, "agent-root", "directory for the sandbox agent's files (default: the temp dir); when sandboxd runs in a container with the host's engine socket, a host path mounted at the same path", "CODEEXEC_AGENT_ROOT")
}

// apply copies the parsed container settings into c.
func (cs *containerSettings) apply(c *sandboxd.Config) {
	// White space splits: engine flags like --runtime=runsc have none;
	// --runtime-arg takes an argument that does.
	c.RuntimeArgs = append(strings.Fields(cs.runtimeArgs), cs.runtimeArg...)
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, " ") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// parseTenantMount reads TENANT=HOST_DIR[:SANDBOX_DIR][:rw], as
// --tenant-mount takes it.
func parseTenantMount(spec string) (string, sandboxd.Mount, error) {
	tenant, mount, ok := strings.Cut(spec, "=")
	tenant = strings.TrimSpace(tenant)
	if !ok || tenant == "" {
		return "", sandboxd.Mount{}, fmt.Errorf("%q names no tenant: write TENANT=HOST_DIR[:SANDBOX_DIR][:rw], e.g. alice=/srv/data/alice", spec)
	}
	m, err := sandboxd.ParseMount(mount)
	if err != nil {
		return "", sandboxd.Mount{}, fmt.Errorf("tenant %s: %w", tenant, err)
	}
	return tenant, m, nil
}

// commaList is the non-blank items of a comma-separated value.
func commaList(v string) stringList {
	var out stringList
	for _, m := range strings.Split(v, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}
