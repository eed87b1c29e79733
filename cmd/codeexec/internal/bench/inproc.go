package bench

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"

	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/services/grpcserver"
	"github.com/codeexec/codeexec/services/suite"
)

// inprocSandbox runs sandboxd in-process behind its gRPC API, on a
// memoryd of its own over a new bbolt file, as codeexec serve runs it:
// sessions are durable (each call's changes are checkpointed), and memory
// and saved tools are served (a first exec carries the saved tools).
func inprocSandbox(ctx context.Context, logger *slog.Logger, cfg sandboxd.Config) (sandboxv1.SandboxServiceClient, func(), error) {
	return inprocSandboxDurable(ctx, logger, cfg, true)
}

// inprocSandboxDurable is inprocSandbox with the sessions durable or not:
// without durability, sandboxd takes no checkpoints (a switch for the
// bench alone, to set the cost of checkpoints beside a run without them).
func inprocSandboxDurable(ctx context.Context, logger *slog.Logger, cfg sandboxd.Config, durable bool) (sandboxv1.SandboxServiceClient, func(), error) {
	dir, err := os.MkdirTemp("", "codeexec-bench-")
	if err != nil {
		return nil, nil, err
	}
	mem, err := memoryd.New(memoryd.Config{Path: filepath.Join(dir, "codeexec.db")}, logger)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	// The store outlives sandboxd, which may still write to it as it closes.
	storeCtx, stopStore := context.WithCancel(ctx)
	store, err := serveInProcess(storeCtx, logger, mem.Register)
	if err != nil {
		stopStore()
		_ = errors.Join(mem.Close(), os.RemoveAll(dir))
		return nil, nil, err
	}
	closeStore := func() { stopStore(); _ = errors.Join(store.Wait(), mem.Close(), os.RemoveAll(dir)) }
	if cfg.Advertise == "" {
		cfg.Advertise = "unix:" + filepath.Join(dir, "sandboxd.sock") // no other replica asks
	}
	ctx, cancel := context.WithCancel(ctx)
	deps := sandboxd.Deps{
		Memory: memoryv1.NewMemoryServiceClient(store.Conn),
		Tools:  memoryv1.NewToolServiceClient(store.Conn),
	}
	if durable {
		deps.Sessions = sessionstorev1.NewSessionStoreServiceClient(store.Conn)
	}
	svc, err := sandboxd.New(ctx, cfg, deps, logger)
	if err != nil {
		cancel()
		closeStore()
		return nil, nil, err
	}
	ip, err := serveInProcess(ctx, logger, svc.Register)
	if err != nil {
		cancel()
		_ = svc.Close()
		closeStore()
		return nil, nil, err
	}
	return sandboxv1.NewSandboxServiceClient(ip.Conn), func() {
		cancel()
		_ = errors.Join(ip.Wait(), svc.Close())
		closeStore()
	}, nil
}

// serveInProcess serves what register adds on an in-process gRPC server
// until ctx ends.
func serveInProcess(ctx context.Context, logger *slog.Logger, register func(*grpc.Server)) (*suite.InProcess, error) {
	ip, err := suite.NewInProcess(logger, grpcserver.NewRegistry())
	if err != nil {
		return nil, err
	}
	register(ip.Server.GRPC)
	ip.Start(ctx)
	return ip, nil
}
