package memdb

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/memoryd"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/grpcserver"
	"github.com/codeexec/codeexec/services/grpctls"
	"github.com/codeexec/codeexec/services/suite"
)

// database is the memory database a command such as backup works on:
// the memoryd at addr, or without one the local database, which it serves in
// this process (sharing it with any codeexec that holds it).
type database struct {
	addr string
	tls  grpctls.Config
	st   Settings
}

// bind binds the database's flags; addrUsage describes --memory.
func (m *database) bind(fs *flagenv.Set, getenv func(string) string, addrUsage string) {
	fs.String(&m.addr, "memory", "", addrUsage, "CODEEXEC_MEMORYD_ADDR")
	BindStateDir(fs, &m.st, getenv)
	cli.BindGRPCTLS(fs, &m.tls)
}

// existingFile is the bbolt file that connect opens, which must exist: a
// command that only reads it must not create an empty database in a
// mistyped state dir and report success. It is empty when the database
// is another process's (--memory) or PostgreSQL's (--store).
func (m *database) existingFile() (string, error) {
	if m.addr != "" {
		return "", nil
	}
	if err := m.st.Resolve(false); err != nil {
		return "", err
	}
	if m.st.memory.Store != "" {
		return "", nil
	}
	path := m.st.Config("").Path
	if _, err := os.Stat(path); err != nil {
		return "", m.st.missing(path, err)
	}
	return path, nil
}

// fileInExistingDir is the bbolt file that connect opens for a command
// that writes it, such as import-upstream: the file may be new, but its
// directory must exist, so that a mistyped state dir or --db fails naming
// it instead of getting a directory and a database that nothing else
// reads. Only the servers (serve, memoryd) create a state dir. It reports
// whether the file is there already; the path is empty when the database
// is another process's (--memory) or PostgreSQL's (--store).
func (m *database) fileInExistingDir() (path string, exists bool, err error) {
	if m.addr != "" {
		return "", false, nil
	}
	if err := m.st.Resolve(false); err != nil {
		return "", false, err
	}
	if m.st.memory.Store != "" {
		return "", false, nil
	}
	path = m.st.Config("").Path
	if _, err := os.Stat(path); err == nil {
		return path, true, nil
	}
	if err := m.st.missingDir(filepath.Dir(path)); err != nil {
		return "", false, err
	}
	return path, false, nil
}

// connect returns a connection to the database's memoryd; release closes
// it.
func (m *database) connect(ctx context.Context, e cli.Env) (conn *grpc.ClientConn, release func(), err error) {
	if m.addr != "" {
		c, err := cli.DialService(m.addr, m.tls)
		if err != nil {
			return nil, nil, err
		}
		return c, func() { _ = c.Close() }, nil
	}
	if err := m.st.Resolve(false); err != nil {
		return nil, nil, err
	}
	logger := slog.New(slog.NewTextHandler(e.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc, err := memoryd.New(m.st.Config(e.Version), logger)
	if err != nil {
		return nil, nil, err
	}
	conn, stop, err := serveLocal(ctx, svc, logger)
	if err != nil {
		_ = svc.Close()
		return nil, nil, err
	}
	return conn, func() { stop(); _ = svc.Close() }, nil
}

// serveLocal serves svc on a private in-process gRPC server until stop is
// called, for work that runs before (or without) the process's own
// servers.
func serveLocal(ctx context.Context, svc *memoryd.Service, logger *slog.Logger) (*grpc.ClientConn, func(), error) {
	ip, err := suite.NewInProcess(logger, grpcserver.NewRegistry())
	if err != nil {
		return nil, nil, err
	}
	svc.Register(ip.Server.GRPC)
	ctx, cancel := context.WithCancel(ctx)
	ip.Start(ctx)
	return ip.Conn, func() { cancel(); _ = ip.Wait() }, nil
}
