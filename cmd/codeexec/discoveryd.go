package main

import (
	"context"
	"io"

	"github.com/codeexec/codeexec/discoveryd"
	"github.com/codeexec/codeexec/services/flagenv"
)

// runDiscoveryd runs DiscoveryService alone.
func runDiscoveryd(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flagenv.New("discoveryd", getenv)
	var (
		common commonSettings
		cfg    discoveryd.Config
		listen string
	)
	bindCommon(fs, &common, "127.0.0.1:9103")
	bindDiscovery(fs, &cfg, getenv)
	fs.String(&listen, "listen", "127.0.0.1:9003", "gRPC address: host:port or unix:/path", "CODEEXEC_DISCOVERYD_LISTEN")
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if err := fs.Err(); err != nil {
		return err
	}
	svcRT, err := common.startService(ctx, "discoveryd", stderr)
	if err != nil {
		return err
	}
	defer svcRT.stopTracing()
	cfg.Registerer = svcRT.srv.Registry
	svc, err := discoveryd.New(cfg, svcRT.logger)
	if err != nil {
		return err
	}
	defer func() { _ = svc.Close() }()
	svc.Register(svcRT.srv.GRPC)
	return svcRT.serve(ctx, listen, common.metrics, defaultGRPCGrace)
}
