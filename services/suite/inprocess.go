// Package suite wires services together in one process: one gRPC server on
// an in-memory listener, and clients that reach it through the same
// generated stubs (and interceptors) that remote wiring uses.
package suite

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	"github.com/codeexec/codeexec/services/dial"
	"github.com/codeexec/codeexec/services/grpcserver"
)

// InProcess is a gRPC server on an in-memory listener plus a client
// connection to it.
type InProcess struct {
	Server *grpcserver.Server
	Conn   *grpc.ClientConn
	lis    *bufconn.Listener
	done   chan error
}

// NewInProcess builds the server; register services on Server.GRPC, then
// call Start.
func NewInProcess(logger *slog.Logger, reg *prometheus.Registry) (*InProcess, error) {
	lis := bufconn.Listen(1 << 20)
	conn, err := dial.New("inprocess", func(ctx context.Context, _ string) (net.Conn, error) {
		return lis.DialContext(ctx)
	})
	if err != nil {
		return nil, err
	}
	return &InProcess{Server: grpcserver.New(logger, reg), Conn: conn, lis: lis, done: make(chan error, 1)}, nil
}

// Start serves until ctx ends.
func (p *InProcess) Start(ctx context.Context) {
	go func() { p.done <- p.Server.Serve(ctx, p.lis, 5*time.Second) }()
}

// Wait returns when the server has stopped.
func (p *InProcess) Wait() error {
	err := <-p.done
	_ = p.Conn.Close()
	return err
}
