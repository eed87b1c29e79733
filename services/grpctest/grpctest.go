// Package grpctest gives a service's tests the suite's real gRPC server
// (services/grpcserver: request IDs, logging and Prometheus interceptors,
// health, reflection) on an in-memory listener, and a client connection
// to it made by services/dial, so that handlers are tested through the
// generated clients and the interceptors that production wiring uses. It
// is services/suite's in-process wiring, sized for one test.
package grpctest

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/services/suite"
)

// Server is one test's gRPC server and a connection to it: register
// services on Server.GRPC before Start, and make clients on Conn at any
// time (it connects on first use).
type Server struct {
	*suite.InProcess

	started bool
	cancel  context.CancelFunc
	tb      testing.TB
}

// Options adjust a Server; the zero value is ready to use.
type Options struct {
	// Logger receives the server's call logs; nil discards them.
	Logger *slog.Logger
	// Registry receives the gRPC metrics; nil makes a fresh one. Either
	// way it is s.Server.Registry.
	Registry *prometheus.Registry
}

// New builds a server for tb. When the test ends the server stops at once
// and the connection closes, before the cleanups registered ahead of New
// run: a service closed in such a cleanup has no calls left in flight.
func New(tb testing.TB, opts Options) *Server {
	tb.Helper()
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ip, err := suite.NewInProcess(logger, opts.Registry)
	if err != nil {
		tb.Fatalf("grpctest: %v", err)
	}
	s := &Server{InProcess: ip, tb: tb}
	tb.Cleanup(s.stop)
	return s
}

// Start serves until the test ends.
func (s *Server) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.started, s.cancel = true, cancel
	s.InProcess.Start(ctx)
}

// Start builds a server for tb, lets register add services to it, starts
// it and returns a connection to it: New and Start in one call.
func Start(tb testing.TB, register func(*grpc.Server)) *grpc.ClientConn {
	tb.Helper()
	s := New(tb, Options{})
	register(s.Server.GRPC)
	s.Start()
	return s.Conn
}

// stop stops the server without a grace period, since a test's calls are
// over when it ends and a stream it left open must not hold up the next
// test, then closes the connection.
func (s *Server) stop() {
	if !s.started {
		_ = s.Conn.Close()
		return
	}
	s.Server.GRPC.Stop()
	// A test that ends at once may stop the server before it serves.
	if err := s.Wait(); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		s.tb.Errorf("grpctest: serve: %v", err)
	}
	s.cancel()
}
