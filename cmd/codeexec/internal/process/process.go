// Package process is what the targets of the codeexec binary start in:
// one target's own process, or in serve every target's. It sets up logs,
// traces and the gRPC TLS files, holds the gRPC server the targets
// register on, and closes what they started, in reverse order, at exit.
package process

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

// Process is what targets start in: one target's own process, or in serve
// every target's. Its fields are set by New, ServeOn and InMemory.
type Process struct {
	// Logger names the process's target (serve's is "codeexec") as its
	// service.
	Logger   *slog.Logger
	Registry *prometheus.Registry
	Creds    *grpctls.Creds
	// Server is the gRPC server the targets register on: alone, the one
	// served on --listen (the gateway alone has none); in serve, the
	// in-memory one.
	Server *grpcserver.Server
	// Listen is where Server is served, alone.
	Listen string
	// metrics is where its metrics are served, alone.
	metrics string
	// InProc, in serve, is the in-memory connection to every target.
	InProc *suite.InProcess
	// closers run in reverse order at exit.
	closers []func()
	// base is Logger without the service, which ServiceLogger names.
	base *slog.Logger
}

// Service is a gRPC target's service.
type Service interface {
	Register(s *grpc.Server)
	Close() error
}

// New sets up logs, traces and the gRPC TLS files.
func New(ctx context.Context, name string, c *Common, stderr io.Writer) (*Process, error) {
	base, err := c.logger(stderr)
	if err != nil {
		return nil, err
	}
	logger := base.With(logkeys.Service, name)
	creds, err := c.tls.Load()
	if err != nil {
		return nil, err
	}
	stopTracing, err := c.startTracing(ctx, name, logger)
	if err != nil {
		return nil, err
	}
	return &Process{Logger: logger, base: base, Registry: grpcserver.NewRegistry(), Creds: creds, closers: []func(){stopTracing}}, nil
}

// ServeOn gives the process a gRPC server of its own, to be served on
// listen and its metrics on metrics.
func (p *Process) ServeOn(listen, metrics string) {
	p.Server = grpcserver.New(p.Logger, p.Registry, p.Creds.ServerOptions()...)
	p.Listen, p.metrics = listen, metrics
}

// InMemory gives the process one in-memory gRPC server for every target
// (serve). Start it once the gRPC targets have registered.
func (p *Process) InMemory() error {
	ip, err := suite.NewInProcess(p.Logger, p.Registry)
	if err != nil {
		return err
	}
	p.InProc, p.Server = ip, ip.Server
	return nil
}

// OnClose runs f at exit, before what was registered earlier.
func (p *Process) OnClose(f func()) { p.closers = append(p.closers, f) }

// Close runs the closers, the last registered first.
func (p *Process) Close() {
	for _, f := range slices.Backward(p.closers) {
		f()
	}
}

// ServiceLogger is a target's logger, which names it as the service: in
// serve in place of "codeexec", so that each line has one service.
func (p *Process) ServiceLogger(name string) *slog.Logger {
	if p.InProc != nil {
		return p.base.With(logkeys.Service, name)
	}
	return p.Logger
}

// Register registers a started service and closes it at exit.
func (p *Process) Register(svc Service, err error) error {
	if err != nil {
		return err
	}
	p.OnClose(func() { _ = svc.Close() })
	svc.Register(p.Server.GRPC)
	return nil
}

// Dial reaches another target: in serve, in memory; alone, at addr (flag
// names it), or nowhere when addr is empty.
func (p *Process) Dial(addr, flag string) (*grpc.ClientConn, error) {
	if p.InProc != nil {
		return p.InProc.Conn, nil
	}
	if addr == "" {
		return nil, nil
	}
	c, err := dial.New(addr, nil, p.Creds.DialOptions()...)
	if err != nil {
		return nil, errors.Join(err, fmt.Errorf("bad %s address", flag))
	}
	p.OnClose(func() { _ = c.Close() })
	return c, nil
}

// ServeGRPC serves the process's gRPC server on --listen, and metrics,
// until ctx ends; then calls in flight get up to grace to finish.
// Plaintext on an address other hosts can reach is allowed (a private
// network, as in deploy/'s compose file) but logged as a warning.
func (p *Process) ServeGRPC(ctx context.Context, grace time.Duration) error {
	lis, err := grpcserver.Listen(p.Listen)
	if err != nil {
		return err
	}
	p.Logger.Info("serving gRPC", logkeys.Address, lis.Addr().String(), "tls", p.Creds != nil)
	if tcp, ok := lis.Addr().(*net.TCPAddr); ok && p.Creds == nil && !tcp.IP.IsLoopback() {
		p.Logger.Warn("gRPC is plaintext and unauthenticated on a non-loopback address: anything that reaches it can call the service; "+
			"set --grpc-tls-cert, --grpc-tls-key and --grpc-tls-ca on every service for mutual TLS", logkeys.Address, lis.Addr().String())
	}
	eg, ctx := errgroup.WithContext(ctx)
	eg.Go(func() error { return p.Server.Serve(ctx, lis, grace) })
	eg.Go(func() error { return grpcserver.ServeMetrics(ctx, p.metrics, p.Registry, p.Logger) })
	return eg.Wait()
}
