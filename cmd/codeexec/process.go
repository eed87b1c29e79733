package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/services/dial"
	"github.com/codeexec/codeexec/services/grpcserver"
	"github.com/codeexec/codeexec/services/grpctls"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/suite"
)

// process is what targets start in: one target's own process, or in serve
// every target's.
type process struct {
	logger   *slog.Logger
	registry *prometheus.Registry
	creds    *grpctls.Creds
	// server is the gRPC server the targets register on: alone, the one
	// served on --listen (the gateway alone has none); in serve, the
	// in-memory one.
	server *grpcserver.Server
	// listen and metrics are where server is served, alone.
	listen, metrics string
	// inproc, in serve, is the in-memory connection to every target.
	inproc *suite.InProcess
	// closers run in reverse order at exit.
	closers []func()
}

// service is a gRPC target's service.
type service interface {
	Register(s *grpc.Server)
	Close() error
}

// newProcess sets up logs, traces and the gRPC TLS files.
func newProcess(ctx context.Context, name string, c *commonSettings, stderr io.Writer) (*process, error) {
	logger, err := c.logger(stderr, name)
	if err != nil {
		return nil, err
	}
	creds, err := c.tls.Load()
	if err != nil {
		return nil, err
	}
	stopTracing, err := c.startTracing(ctx, name, logger)
	if err != nil {
		return nil, err
	}
	return &process{logger: logger, registry: grpcserver.NewRegistry(), creds: creds, closers: []func(){stopTracing}}, nil
}

// serveOn gives the process a gRPC server of its own, to be served on
// listen and its metrics on metrics.
func (p *process) serveOn(listen, metrics string) {
	p.server = grpcserver.New(p.logger, p.registry, p.creds.ServerOptions()...)
	p.listen, p.metrics = listen, metrics
}

// inMemory gives the process one in-memory gRPC server for every target
// (serve). Start it once the gRPC targets have registered.
func (p *process) inMemory() error {
	ip, err := suite.NewInProcess(p.logger, p.registry)
	if err != nil {
		return err
	}
	p.inproc, p.server = ip, ip.Server
	return nil
}

// onClose runs f at exit, before what was registered earlier.
func (p *process) onClose(f func()) { p.closers = append(p.closers, f) }

func (p *process) close() {
	for _, f := range slices.Backward(p.closers) {
		f()
	}
}

// serviceLogger is a target's logger: in serve it names the service,
// which alone the process logger does.
func (p *process) serviceLogger(name string) *slog.Logger {
	if p.inproc != nil {
		return p.logger.With(logkeys.Service, name)
	}
	return p.logger
}

// register registers a started service and closes it at exit.
func (p *process) register(svc service, err error) error {
	if err != nil {
		return err
	}
	p.onClose(func() { _ = svc.Close() })
	svc.Register(p.server.GRPC)
	return nil
}

// dial reaches another target: in serve, in memory; alone, at addr (flag
// names it), or nowhere when addr is empty.
func (p *process) dial(addr, flag string) (*grpc.ClientConn, error) {
	if p.inproc != nil {
		return p.inproc.Conn, nil
	}
	if addr == "" {
		return nil, nil
	}
	c, err := dial.New(addr, nil, p.creds.DialOptions()...)
	if err != nil {
		return nil, errors.Join(err, fmt.Errorf("bad %s address", flag))
	}
	p.onClose(func() { _ = c.Close() })
	return c, nil
}

// serveGRPC serves the process's gRPC server on --listen, and metrics,
// until ctx ends; then calls in flight get up to grace to finish.
// Plaintext on an address other hosts can reach is allowed (a private
// network, as in deploy/'s compose file) but logged as a warning.
func (p *process) serveGRPC(ctx context.Context, grace time.Duration) error {
	lis, err := grpcserver.Listen(p.listen)
	if err != nil {
		return err
	}
	p.logger.Info("serving gRPC", logkeys.Address, lis.Addr().String(), "tls", p.creds != nil)
	if tcp, ok := lis.Addr().(*net.TCPAddr); ok && p.creds == nil && !tcp.IP.IsLoopback() {
		p.logger.Warn("gRPC is plaintext and unauthenticated on a non-loopback address: anything that reaches it can call the service; "+
			"set --grpc-tls-cert, --grpc-tls-key and --grpc-tls-ca on every service for mutual TLS", logkeys.Address, lis.Addr().String())
	}
	eg, ctx := errgroup.WithContext(ctx)
	eg.Go(func() error { return p.server.Serve(ctx, lis, grace) })
	eg.Go(func() error { return grpcserver.ServeMetrics(ctx, p.metrics, p.registry, p.logger) })
	return eg.Wait()
}
