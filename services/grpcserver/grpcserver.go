// Package grpcserver runs a gRPC server the same way for every service:
// request IDs, logging and Prometheus interceptors, health, reflection, a
// metrics endpoint, and a graceful stop with a deadline.
package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/services/dial"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/requestid"
	"github.com/codeexec/codeexec/services/tracing"
)

// Server is a gRPC server with the suite's standard services attached.
type Server struct {
	GRPC     *grpc.Server
	Health   *health.Server
	Registry *prometheus.Registry
	logger   *slog.Logger
}

// New builds a server. Register the service implementations on s.GRPC, then
// call Serve. The registry collects the gRPC metrics plus anything the
// service registers on it. extra adds options, such as TLS credentials
// (services/grpctls).
func New(logger *slog.Logger, reg *prometheus.Registry, extra ...grpc.ServerOption) *Server {
	if reg == nil {
		reg = NewRegistry()
	}
	metrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
	reg.MustRegister(metrics)
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(dial.MaxMessageBytes),
		grpc.MaxSendMsgSize(dial.MaxMessageBytes),
		grpc.ChainUnaryInterceptor(requestid.UnaryServerInterceptor, metrics.UnaryServerInterceptor(), unaryLog(logger)),
		grpc.ChainStreamInterceptor(requestid.StreamServerInterceptor, metrics.StreamServerInterceptor(), streamLog(logger)),
	}
	// Spans only when an OTLP endpoint is configured; none otherwise.
	opts = append(opts, tracing.ServerOptions()...)
	s := grpc.NewServer(append(opts, extra...)...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	reflection.Register(s)
	return &Server{GRPC: s, Health: hs, Registry: reg, logger: logger}
}

// NewRegistry returns a registry with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Listen opens addr: "host:port" for TCP, "unix:/path" or "/path" for a
// unix socket (a stale socket file is removed first).
func Listen(addr string) (net.Listener, error) {
	path, isUnix := strings.CutPrefix(addr, "unix:")
	if !isUnix && strings.HasPrefix(addr, "/") {
		path, isUnix = addr, true
	}
	if isUnix {
		if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(path)
		}
		lis, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("listen on unix socket %s: %w", path, err)
		}
		return lis, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("bad listen address %q: want host:port or unix:/path", addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return lis, nil
}

// Serve serves on lis until ctx ends, then stops gracefully: health turns
// NOT_SERVING, GracefulStop runs for at most grace, then Stop.
func (s *Server) Serve(ctx context.Context, lis net.Listener, grace time.Duration) error {
	s.Health.Resume()
	errc := make(chan error, 1)
	go func() { errc <- s.GRPC.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.Health.Shutdown()
	done := make(chan struct{})
	go func() { s.GRPC.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		s.logger.Warn("graceful stop timed out; stopping hard", logkeys.Duration, grace)
		s.GRPC.Stop()
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// ServeMetrics serves /metrics from reg on addr until ctx ends. An empty addr
// disables it.
func ServeMetrics(ctx context.Context, addr string, reg *prometheus.Registry, logger *slog.Logger) error {
	if addr == "" {
		return nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listener on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("serving metrics", logkeys.MetricsAddr, lis.Addr().String())
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func unaryLog(logger *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		logCall(ctx, logger, info.FullMethod, start, err)
		return resp, err
	}
}

func streamLog(logger *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		start := time.Now()
		err := handler(srv, ss)
		logCall(ss.Context(), logger, info.FullMethod, start, err)
		return err
	}
}

func logCall(ctx context.Context, logger *slog.Logger, method string, start time.Time, err error) {
	if strings.HasPrefix(method, "/grpc.health.") || strings.HasPrefix(method, "/grpc.reflection.") {
		return
	}
	level := slog.LevelDebug
	// Aborted is a lost race that the caller retries (update_memory's
	// revision check), part of normal work, so it stays at debug too.
	if err != nil && status.Code(err) != codes.Aborted {
		level = slog.LevelInfo
	}
	logger.Log(ctx, level, "grpc call",
		logkeys.GRPCMethod, method,
		logkeys.GRPCCode, status.Code(err).String(),
		logkeys.Duration, time.Since(start),
		logkeys.RequestID, requestid.From(ctx))
}
