package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/cmd/codeexec/internal/process"
	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/grpcserver"
	"github.com/codeexec/codeexec/services/grpctls"
	"github.com/codeexec/codeexec/services/suite"
)

// memorydUnit is memoryd's settings.
type memorydUnit struct{ st memorySettings }

func (u *memorydUnit) bind(fs *flagenv.Set, e cli.Env, _ bool) {
	bindStateDir(fs, &u.st, e.Getenv)
	bindMemory(fs, &u.st)
}

func (u *memorydUnit) check() error { return nil }

func (u *memorydUnit) start(ctx context.Context, p *process.Process) error {
	cfg := u.st.memoryConfig()
	cfg.Registerer = p.Registry
	logger := p.ServiceLogger("memoryd")
	svc, err := memoryd.New(cfg, logger)
	if err == nil && p.InProc != nil {
		// The embedded default imports an upstream user's state.
		importUpstreamOnFirstStart(ctx, svc, u.st.stateDir, logger)
	}
	return p.Register(svc, err)
}

func (u *memorydUnit) serve(ctx context.Context, p *process.Process, _ cli.Env) error {
	return p.ServeGRPC(ctx, defaultGRPCGrace)
}

// memorySettings say where the memory database is and how memoryd uses it.
type memorySettings struct {
	stateDir string
	memory   memoryd.Config
	maxValue int64
}

// bindStateDir binds where the memory database lives: a bbolt file, or a
// PostgreSQL database with --store.
func bindStateDir(fs *flagenv.Set, s *memorySettings, getenv func(string) string) {
	fs.String(&s.stateDir, "state-dir", stateDirDefault(getenv), "state directory; holds the memory database codeexec.db", "MCP_BRIDGE_STATE_DIR")
	fs.String(&s.memory.Path, "db", "", "bbolt file for memory and saved tools (default STATE_DIR/codeexec.db); any number of codeexec processes may share it", "CODEEXEC_DB")
	bindStoreURL(fs, &s.memory.Store, "store", "PostgreSQL URL for memory, saved tools and session checkpoints instead of the bbolt file, "+
		"e.g. postgres://codeexec@db1,db2/codeexec?target_session_attrs=read-write&sslmode=verify-full; "+
		"the password comes from PGPASSWORD, a PGPASSFILE or --store-password-file, never from the URL on the command line", "CODEEXEC_STORE", getenv)
	fs.String(&s.memory.StorePasswordFile, "store-password-file", "", "file holding the PostgreSQL password (read for each new connection, so a rotated secret is picked up)", "CODEEXEC_STORE_PASSWORD_FILE")
	fs.Duration(&s.memory.StoreWait, "store-wait", memoryd.DefaultStoreWait, "with --store: how long a call waits while the database is unreachable or failing over, and how long memoryd waits for it at start", "CODEEXEC_STORE_WAIT")
}

// bindMemory binds memoryd's own settings.
func bindMemory(fs *flagenv.Set, s *memorySettings) {
	fs.Duration(&s.memory.OwnerWait, "owner-wait", memoryd.DefaultOwnerWait, "when the process that serves a shared database exits, how long calls wait for another to take it over", "CODEEXEC_OWNER_WAIT")
	fs.Bytes(&s.maxValue, "max-value", memoryd.DefaultMaxValueBytes, "largest memory value or saved tool, e.g. 1m", "CODEEXEC_MEMORY_MAX_VALUE")
}

// memoryConfig resolves the database path against the state dir.
func (s *memorySettings) memoryConfig() memoryd.Config {
	cfg := s.memory
	if cfg.Path == "" {
		cfg.Path = filepath.Join(s.stateDir, "codeexec.db")
	}
	cfg.MaxValueBytes = int(s.maxValue)
	cfg.Version = version
	return cfg
}

// memoryDB is the database a command such as backup works on: the
// memoryd at addr, or without one the local database, which it serves in
// this process (sharing it with any codeexec that holds it).
type memoryDB struct {
	addr string
	tls  grpctls.Config
	st   memorySettings
}

// bind binds the database's flags; addrUsage describes --memory.
func (m *memoryDB) bind(fs *flagenv.Set, getenv func(string) string, addrUsage string) {
	fs.String(&m.addr, "memory", "", addrUsage, "CODEEXEC_MEMORYD_ADDR")
	bindStateDir(fs, &m.st, getenv)
	cli.BindGRPCTLS(fs, &m.tls)
}

// connect returns a connection to the database's memoryd; release closes
// it.
func (m *memoryDB) connect(ctx context.Context, stderr io.Writer) (conn *grpc.ClientConn, release func(), err error) {
	if m.addr != "" {
		c, err := cli.DialService(m.addr, m.tls)
		if err != nil {
			return nil, nil, err
		}
		return c, func() { _ = c.Close() }, nil
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc, err := memoryd.New(m.st.memoryConfig(), logger)
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

// memorydBackupCommand copies a memoryd's database to a file: a remote one
// with --memory, else the local state dir's, while every codeexec that
// shares it keeps running.
type memorydBackupCommand struct{ db memoryDB }

func (c *memorydBackupCommand) Bind(fs *flagenv.Set, e cli.Env) {
	c.db.bind(fs, e.Getenv, "a memoryd's address (host:port or unix:/path); empty backs up the local database")
}

func (c *memorydBackupCommand) Run(ctx context.Context, args []string, e cli.Env) error {
	if len(args) != 1 {
		fmt.Fprintln(e.Stderr, "usage: codeexec memoryd backup [--memory ADDR | --state-dir DIR | --db FILE | --store postgres://…] FILE")
		return cli.ErrUsage
	}
	conn, closeConn, err := c.db.connect(ctx, e.Stderr)
	if err != nil {
		return err
	}
	defer closeConn()
	n, err := memoryd.BackupToFile(ctx, memoryv1.NewMemoryServiceClient(conn), args[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "backed up %d bytes to %s\n", n, args[0])
	return nil
}

// stateDirDefault resolves MCP_BRIDGE_STATE_DIR's default, ~/MCPs.
func stateDirDefault(getenv func(string) string) string {
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, "MCPs")
	}
	return "MCPs"
}
