package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/codeexec/codeexec/gateway"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/grpcserver"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/suite"
)

// runServe runs every service in one process: the embedded default that a
// desktop MCP client launches.
func runServe(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flagenv.New("serve", getenv)
	var (
		common commonSettings
		gw     gateway.Config
		sb     = sandboxd.DefaultConfig()
		cs     containerSettings
		st     stores
		httpAd string
	)
	bindCommon(fs, &common, "")
	bindGateway(fs, &gw)
	bindSandbox(fs, &sb, &cs)
	bindStores(fs, &st, getenv)
	fs.String(&httpAd, "http", "", "serve MCP over streamable HTTP at ADDR/mcp instead of stdio, e.g. 127.0.0.1:8080", "CODEEXEC_HTTP")
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if err := fs.Err(); err != nil {
		return err
	}
	sharedTimeouts(&gw, &sb)
	gw.Version = version
	gw.OutputLimitBytes = sb.OutputLimitBytes
	gw.SessionIdleTimeout = sb.IdleTimeout
	logger, err := common.logger(stderr, "codeexec")
	if err != nil {
		return err
	}

	reg := grpcserver.NewRegistry()
	inproc, err := suite.NewInProcess(logger, reg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	deps, closeStores, err := st.open(ctx, inproc, reg, logger)
	if err != nil {
		return err
	}
	defer closeStores()

	sbs, err := sandboxd.New(ctx, sb, deps, logger)
	if err != nil {
		return err
	}
	defer func() { _ = sbs.Close() }()
	sbs.Register(inproc.Server.GRPC)
	inproc.Start(ctx)

	g, err := gateway.New(gw, sandboxv1.NewSandboxServiceClient(inproc.Conn), logger)
	if err != nil {
		return err
	}
	logger.Info("codeexec serving", "transport", map[bool]string{true: "http", false: "stdio"}[httpAd != ""], logkeys.Address, httpAd)
	if httpAd == "" {
		err = g.ServeStdio(ctx, stdin, stdout)
	} else {
		err = serveHTTP(ctx, httpAd, g, reg, logger)
	}
	closeCtx, closeCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer closeCancel()
	_ = g.Close(closeCtx)
	cancel()
	_ = inproc.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// serveHTTP serves MCP at /mcp and metrics at /metrics on one listener.
func serveHTTP(ctx context.Context, addr string, g *gateway.Gateway, reg *prometheus.Registry, logger *slog.Logger) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen for MCP over HTTP on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", g.HTTPHandler())
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("serving MCP over streamable HTTP", logkeys.Address, "http://"+lis.Addr().String()+"/mcp")
	var eg errgroup.Group
	eg.Go(func() error {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(shutdownCtx)
	})
	if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return eg.Wait()
}
