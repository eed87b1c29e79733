package main

import (
	"context"
	"errors"
	"io"
	"time"

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
		hs     httpSettings
	)
	bindCommon(fs, &common, "")
	bindGateway(fs, &gw)
	bindSandbox(fs, &sb, &cs)
	bindStores(fs, &st, getenv)
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
	cs.apply(&sb)
	sharedTimeouts(&gw, &sb)
	gw.Version = version
	gw.OutputLimitBytes = sb.OutputLimitBytes
	gw.SessionIdleTimeout = sb.IdleTimeout
	// Bad settings are reported before anything opens or starts.
	if err := errors.Join(sb.Validate(), gw.Validate()); err != nil {
		return err
	}
	logger, err := common.logger(stderr, "codeexec")
	if err != nil {
		return err
	}
	stopTracing, err := common.startTracing(ctx, "codeexec", logger)
	if err != nil {
		return err
	}
	defer stopTracing()

	reg := grpcserver.NewRegistry()
	inproc, err := suite.NewInProcess(logger, reg)
	if err != nil {
		return err
	}
	// The services outlive the signal: on SIGTERM the HTTP server first
	// lets running calls finish (--shutdown-grace), then they stop.
	signalled := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
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

	gw.Registerer = reg
	g, err := gateway.New(gw, sandboxv1.NewSandboxServiceClient(inproc.Conn), logger)
	if err != nil {
		return err
	}
	logger.Info("codeexec serving", "transport", map[bool]string{true: "http", false: "stdio"}[httpAd != ""], logkeys.Address, httpAd)
	if httpAd == "" {
		err = g.ServeStdio(signalled, stdin, stdout)
	} else {
		err = serveHTTP(signalled, httpAd, hs.shutdownGrace, g, reg, logger)
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
