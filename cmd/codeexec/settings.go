package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/gateway"
	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/services/dial"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/grpcserver"
	"github.com/codeexec/codeexec/services/grpctls"
	"github.com/codeexec/codeexec/services/requestid"
)

// commonSettings apply to every target.
type commonSettings struct {
	logLevel  string
	logFormat string
	metrics   string
	otlp      string
	tls       grpctls.Config
}

func bindCommon(fs *flagenv.Set, c *commonSettings, metricsDefault string) {
	fs.String(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error", "MCP_BRIDGE_LOG_LEVEL", "CODEEXEC_LOG_LEVEL")
	fs.String(&c.logFormat, "log-format", "text", "log format: text or json", "CODEEXEC_LOG_FORMAT")
	fs.String(&c.metrics, "metrics", metricsDefault, "serve Prometheus /metrics on this address; empty disables it", "CODEEXEC_METRICS_ADDR")
	fs.String(&c.otlp, "otlp-endpoint", "", "export OpenTelemetry traces to this OTLP/gRPC URL, e.g. http://collector:4317; empty exports none", "CODEEXEC_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	bindGRPCTLS(fs, &c.tls)
}

// grpcService is what each split gRPC target (sandboxd, discoveryd,
// memoryd) starts with: its logger, its tracing, and a gRPC server with
// the TLS files, if any.
type grpcService struct {
	logger      *slog.Logger
	srv         *grpcserver.Server
	creds       *grpctls.Creds
	stopTracing func()
}

func (c *commonSettings) startService(ctx context.Context, name string, stderr io.Writer) (*grpcService, error) {
	logger, err := c.logger(stderr, name)
	if err != nil {
		return nil, err
	}
	creds, err := c.tls.Load()
	if err != nil {
		return nil, err
	}
	stop, err := c.startTracing(ctx, name, logger)
	if err != nil {
		return nil, err
	}
	return &grpcService{logger: logger, srv: grpcserver.New(logger, nil, creds.ServerOptions()...), creds: creds, stopTracing: stop}, nil
}

// dialService connects a client command (health, backup, import) to a
// service, with TLS when tlsc names files.
func dialService(addr string, tlsc grpctls.Config) (*grpc.ClientConn, error) {
	creds, err := tlsc.Load()
	if err != nil {
		return nil, err
	}
	return dial.New(addr, nil, creds.DialOptions()...)
}

// bindGRPCTLS binds the mutual TLS files of the split services' gRPC.
func bindGRPCTLS(fs *flagenv.Set, c *grpctls.Config) {
	fs.String(&c.CertFile, "grpc-tls-cert", "", "gRPC between services: this process's certificate (PEM), served and shown to peers", "CODEEXEC_GRPC_TLS_CERT")
	fs.String(&c.KeyFile, "grpc-tls-key", "", "gRPC between services: the certificate's private key (PEM)", "CODEEXEC_GRPC_TLS_KEY")
	fs.String(&c.CAFile, "grpc-tls-ca", "", "gRPC between services: the CA bundle (PEM) that peers' certificates must chain to", "CODEEXEC_GRPC_TLS_CA")
}

// logger builds the process logger. Logs go to stderr: stdout may carry MCP.
func (c *commonSettings) logger(stderr io.Writer, service string) (*slog.Logger, error) {
	var level slog.Level
	switch strings.ToLower(c.logLevel) {
	case "debug":
		level = slog.LevelDebug
	case "info", "":
		level = slog.LevelInfo
	case "warn", "warning":
		level = slog.LevelWarn
	case "error", "critical":
		level = slog.LevelError
	default:
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", c.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch c.logFormat {
	case "json":
		h = slog.NewJSONHandler(stderr, opts)
	case "text", "":
		h = slog.NewTextHandler(stderr, opts)
	default:
		return nil, fmt.Errorf("log format %q: want text or json", c.logFormat)
	}
	// Lines logged with a call's context carry its request ID.
	return slog.New(requestid.NewLogHandler(h)).With("service", service), nil
}

// bindGateway binds the MCP surface's settings.
func bindGateway(fs *flagenv.Set, c *gateway.Config) {
	fs.Duration(&c.DefaultTimeout, "timeout", 30*time.Second, "default run_python timeout", "MCP_BRIDGE_TIMEOUT")
	fs.Duration(&c.MaxTimeout, "max-timeout", 120*time.Second, "largest run_python timeout; larger requests are clamped", "MCP_BRIDGE_MAX_TIMEOUT")
	fs.String(&c.OutputMode, "output-mode", "compact", "result format: compact or toon", "MCP_BRIDGE_OUTPUT_MODE")
	fs.String(&c.Tenant, "tenant", "default", "tenant for memory, saved tools and sessions", "CODEEXEC_TENANT")
}

// containerSettings are upstream's container options that sandboxd.Config
// does not hold.
type containerSettings struct {
	runtimeIdleTimeout time.Duration
	runtimeArgs        string     // CODEEXEC_RUNTIME_ARGS, space-separated
	runtimeArg         stringList // --runtime-arg, repeated
}

// bindSandbox binds sandboxd's settings.
func bindSandbox(fs *flagenv.Set, c *sandboxd.Config, cs *containerSettings) {
	d := sandboxd.DefaultConfig()
	fs.String(&c.Runtime, "runtime", "", "sandbox runtime: bwrap, podman or docker; empty detects one in that order", "MCP_BRIDGE_RUNTIME")
	fs.String(&c.Python, "python", d.Python, "Python interpreter inside the sandbox", "CODEEXEC_PYTHON")
	fs.Bytes(&c.MemoryBytes, "memory", d.MemoryBytes, "memory limit per sandbox, e.g. 512m", "MCP_BRIDGE_MEMORY")
	fs.Int(&c.Pids, "pids", d.Pids, "process and thread limit per sandbox", "MCP_BRIDGE_PIDS")
	fs.Float(&c.CPUs, "cpus", 0, "CPU cores per sandbox, e.g. 0.5; 0 means no cap", "MCP_BRIDGE_CPUS")
	fs.Duration(&c.CPUTime, "cpu-time", d.CPUTime, "total CPU time per sandbox; 0 means no cap", "CODEEXEC_CPU_TIME")
	fs.Bytes(&c.TmpBytes, "tmp-size", d.TmpBytes, "size of the sandbox's /tmp", "CODEEXEC_TMP_SIZE")
	fs.Bytes(&c.WorkspaceBytes, "workspace-size", d.WorkspaceBytes, "size of the sandbox's /workspace", "CODEEXEC_WORKSPACE_SIZE")
	fs.Bytes(&c.OutputLimitBytes, "output-limit", d.OutputLimitBytes, "bytes of stdout and of stderr kept per call; 0 means no cap", "CODEEXEC_OUTPUT_LIMIT")
	fs.Duration(&c.IdleTimeout, "idle-timeout", d.IdleTimeout, "destroy sessions idle this long; 0 never does", "CODEEXEC_IDLE_TIMEOUT")
	fs.Int(&c.PoolSize, "pool", d.PoolSize, "sandboxes kept started and ready for new sessions", "CODEEXEC_POOL_SIZE")
	fs.Int(&c.LaunchSpares, "launch-spares", d.LaunchSpares, "sandboxes kept set up and waiting for their command: the fork server's, or bwrap launchers while it is down; 0 keeps none", "CODEEXEC_LAUNCH_SPARES")
	fs.Bool(&c.ForkServer, "fork-server", d.ForkServer, "fork bwrap sandboxes from a server that has Python started and the agent imported; false starts each with bwrap", "CODEEXEC_FORK_SERVER")
	fs.Int(&c.MaxSessions, "max-sessions", d.MaxSessions, "most live sessions; 0 means no cap", "CODEEXEC_MAX_SESSIONS")
	c.StartTimeout = d.StartTimeout
	fs.String(&c.Image, "image", d.Image, "container image for the podman and docker runtimes", "MCP_BRIDGE_IMAGE")
	fs.String(&c.ContainerUser, "container-user", d.ContainerUser, "uid:gid inside containers", "MCP_BRIDGE_CONTAINER_USER")
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

// sharedTimeouts makes the gateway and sandboxd agree when both run here.
func sharedTimeouts(g *gateway.Config, s *sandboxd.Config) {
	s.DefaultTimeout, s.MaxTimeout = g.DefaultTimeout, g.MaxTimeout
}

// stateDir resolves MCP_BRIDGE_STATE_DIR's default, ~/MCPs.
func stateDirDefault(getenv func(string) string) string {
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, "MCPs")
	}
	return "MCPs"
}
