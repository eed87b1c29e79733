package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/sync/errgroup"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/codeexec/codeexec/gateway"
	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/grpcserver"
	"github.com/codeexec/codeexec/services/grpctls"
	"github.com/codeexec/codeexec/services/logkeys"
)

// runSandboxd runs SandboxService alone.
func runSandboxd(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flagenv.New("sandboxd", getenv)
	var (
		common            commonSettings
		sb                = sandboxd.DefaultConfig()
		cs                containerSettings
		listen            string
		grace             time.Duration
		discovery, memory string
	)
	bindCommon(fs, &common, "127.0.0.1:9102")
	bindSandbox(fs, &sb, &cs)
	bindSandboxTimeouts(fs, &sb)
	fs.String(&listen, "listen", "127.0.0.1:9002", "gRPC address: host:port or unix:/path", "CODEEXEC_SANDBOXD_LISTEN")
	fs.Duration(&grace, "shutdown-grace", 30*time.Second, "on SIGTERM, how long running executions may finish before they are stopped", "CODEEXEC_SHUTDOWN_GRACE")
	fs.String(&discovery, "discovery", "", "discoveryd address; empty: no MCP servers", "CODEEXEC_DISCOVERYD_ADDR")
	fs.String(&memory, "memory-addr", "", "memoryd address; empty: no memory or saved tools", "CODEEXEC_MEMORYD_ADDR")
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if err := fs.Err(); err != nil {
		return err
	}
	cs.apply(&sb)
	svcRT, err := common.startService(ctx, "sandboxd", stderr)
	if err != nil {
		return err
	}
	defer svcRT.stopTracing()
	deps, closeDeps, err := remoteDeps(discovery, memory, svcRT.creds.DialOptions()...)
	if err != nil {
		return err
	}
	defer closeDeps()
	deps.Registry = svcRT.srv.Registry
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	svc, err := sandboxd.New(ctx, sb, deps, svcRT.logger)
	if err != nil {
		return err
	}
	defer func() { _ = svc.Close() }()
	svc.Register(svcRT.srv.GRPC)
	return svcRT.serve(ctx, listen, common.metrics, grace)
}

// runGateway runs the MCP gateway against a remote sandboxd.
func runGateway(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flagenv.New("gateway", getenv)
	var (
		common commonSettings
		gw     gateway.Config
		sbs    sandboxSettings
		hs     httpSettings
	)
	bindCommon(fs, &common, "")
	bindGateway(fs, &gw)
	fs.Bytes(&gw.OutputLimitBytes, "output-limit", sandboxd.DefaultConfig().OutputLimitBytes, "sandboxd's output cap, quoted in truncation notes", "CODEEXEC_OUTPUT_LIMIT")
	fs.Duration(&gw.SessionIdleTimeout, "idle-timeout", sandboxd.DefaultConfig().IdleTimeout, "end HTTP sessions idle this long; 0 never does", "CODEEXEC_IDLE_TIMEOUT")
	bindSandboxAddr(fs, &sbs)
	bindHTTP(fs, &hs, &gw)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if err := fs.Err(); err != nil {
		return err
	}
	httpAd, err := hs.finish(&gw)
	if err != nil {
		return err
	}
	gw.Version = version
	logger, err := common.logger(stderr, "gateway")
	if err != nil {
		return err
	}
	stopTracing, err := common.startTracing(ctx, "gateway", logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	creds, err := common.tls.Load()
	if err != nil {
		return err
	}
	sandboxClient, closeSandbox, err := sbs.client(ctx, logger, creds.DialOptions()...)
	if err != nil {
		return err
	}
	defer closeSandbox()
	reg := grpcserver.NewRegistry()
	gw.Registerer = reg
	g, err := gateway.New(gw, sandboxClient, logger)
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = g.Close(closeCtx)
	}()
	if httpAd == "" {
		return g.ServeStdio(ctx, stdin, stdout)
	}
	return serveHTTP(ctx, httpAd, hs.shutdownGrace, g, reg, logger)
}

// defaultGRPCGrace bounds a graceful stop of the services whose calls are
// short (discoveryd, memoryd); sandboxd's is --shutdown-grace.
const defaultGRPCGrace = 15 * time.Second

// serve serves the service on listen, and metrics, until ctx ends; then
// calls in flight get up to grace to finish. Plaintext on an address other
// hosts can reach is allowed (a private network, as in deploy/'s compose
// file) but logged as a warning.
func (s *grpcService) serve(ctx context.Context, listen, metrics string, grace time.Duration) error {
	lis, err := grpcserver.Listen(listen)
	if err != nil {
		return err
	}
	s.logger.Info("serving gRPC", logkeys.Address, lis.Addr().String(), "tls", s.creds != nil)
	if tcp, ok := lis.Addr().(*net.TCPAddr); ok && s.creds == nil && !tcp.IP.IsLoopback() {
		s.logger.Warn("gRPC is plaintext and unauthenticated on a non-loopback address: anything that reaches it can call the service; "+
			"set --grpc-tls-cert, --grpc-tls-key and --grpc-tls-ca on every service for mutual TLS", logkeys.Address, lis.Addr().String())
	}
	eg, ctx := errgroup.WithContext(ctx)
	eg.Go(func() error { return s.srv.Serve(ctx, lis, grace) })
	eg.Go(func() error { return grpcserver.ServeMetrics(ctx, metrics, s.srv.Registry, s.logger) })
	return eg.Wait()
}

// runHealth checks a gRPC service's health: for container health checks.
func runHealth(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flagenv.New("health", getenv)
	var tlsc grpctls.Config
	bindGRPCTLS(fs, &tlsc)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if err := fs.Err(); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: codeexec health [--grpc-tls-cert F --grpc-tls-key F --grpc-tls-ca F] ADDR|http://HOST:PORT/healthz")
		return errUsage
	}
	if isHTTPURL(args[0]) {
		return httpHealth(ctx, args[0], stdout)
	}
	conn, err := dialService(args[0], tlsc)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return fmt.Errorf("health check of %s: %w", args[0], err)
	}
	fmt.Fprintln(stdout, resp.GetStatus())
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s is %s", args[0], resp.GetStatus())
	}
	return nil
}
