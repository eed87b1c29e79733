// Package localsock is a serve process's sandbox socket in its state dir,
// and the dialer with which the gateway reaches such a socket or a
// sandboxd replica that holds a session.
package localsock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/process"
	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/services/dial"
	"github.com/codeexec/codeexec/services/grpcserver"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/randomid"
	"github.com/codeexec/codeexec/services/usersock"
)

// Every serve process on a state dir serves its sandboxes on a socket of
// its own there, so that a session it holds can be used through any other
// (the gateway follows SessionElsewhere to it): two MCP clients, or a
// client that reconnects to another process, reach one session.
const (
	localSocketPrefix = "sandboxd-"
	localSocketSuffix = ".sock"
	localSocketWhat   = "a codeexec process's sandbox socket"
)

// Socket is this process's sandbox socket.
type Socket struct {
	// Path is the socket's, once Prepare has picked it.
	Path string
	stop func() // stops serving it; nil until Serve
}

// Prepare picks the socket's name in dir and removes the sockets that
// processes killed earlier left there.
func (l *Socket) Prepare(dir string, logger *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	removeStaleSockets(dir, logger)
	l.Path = filepath.Join(dir, localSocketPrefix+randomid.Hex(8)+localSocketSuffix)
	return nil
}

// Serve serves svc's SandboxService (and nothing else) on the socket until
// the process closes, or Stop.
func (l *Socket) Serve(ctx context.Context, p *process.Process, svc *sandboxd.Service) error {
	lis, err := usersock.Listen(l.Path, localSocketWhat, p.Logger)
	if err != nil {
		return err
	}
	srv := grpcserver.New(p.ServiceLogger("sandboxd"), nil)
	svc.Register(srv.GRPC)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, lis, 5*time.Second); err != nil {
			p.Logger.Warn("the sandbox socket stopped", logkeys.Error, err)
		}
	}()
	l.stop = sync.OnceFunc(func() {
		cancel()
		<-done
		_ = os.Remove(l.Path)
	})
	p.OnClose(l.stop)
	return nil
}

// Stop stops serving the socket and removes it; before Serve it does
// nothing.
func (l *Socket) Stop() {
	if l.stop != nil {
		l.stop()
	}
}

// removeStaleSockets removes the sandbox sockets in dir that no process
// serves any more: a killed process cannot remove its own.
func removeStaleSockets(dir string, logger *slog.Logger) {
	names, _ := filepath.Glob(filepath.Join(dir, localSocketPrefix+"*"+localSocketSuffix))
	for _, name := range names {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := usersock.Dial(ctx, name, localSocketWhat)
		cancel()
		if err == nil {
			_ = c.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			if os.Remove(name) == nil {
				logger.Debug("removed a stale sandbox socket", logkeys.Address, name)
			}
		}
	}
}

// DialReplica connects to the sandbox replica a SessionElsewhere answer
// names: another codeexec process's socket on this machine (unix:/path,
// its peer checked), or a sandboxd replica at host:port with the
// process's credentials.
func DialReplica(opts []grpc.DialOption) func(addr string) (*grpc.ClientConn, error) {
	return func(addr string) (*grpc.ClientConn, error) {
		if path, ok := strings.CutPrefix(addr, "unix:"); ok {
			return dial.New(addr, func(ctx context.Context, _ string) (net.Conn, error) {
				return usersock.Dial(ctx, path, localSocketWhat)
			})
		}
		// A replica that went away must not hold a call for the default
		// 20s connect timeout: the gateway asks again meanwhile.
		return dial.New(addr, nil, append([]grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.DefaultConfig, MinConnectTimeout: 2 * time.Second,
		})}, opts...)...)
	}
}
