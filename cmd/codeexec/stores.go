package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/discoveryd"
	"github.com/codeexec/codeexec/memoryd"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/grpcserver"
	"github.com/codeexec/codeexec/services/suite"
)

// stores are the settings of the services sandboxd brokers to.
type stores struct {
	stateDir  string
	memory    memoryd.Config
	maxValue  int64
	discovery discoveryd.Config
}

func bindStores(fs *flagenv.Set, s *stores, getenv func(string) string) {
	bindStateDir(fs, s, getenv)
	bindMemory(fs, s)
	bindDiscovery(fs, &s.discovery, getenv)
}

// bindStateDir binds where the memory database lives: a bbolt file, or a
// PostgreSQL database with --store.
func bindStateDir(fs *flagenv.Set, s *stores, getenv func(string) string) {
	fs.String(&s.stateDir, "state-dir", stateDirDefault(getenv), "state directory; holds the memory database codeexec.db", "MCP_BRIDGE_STATE_DIR")
	fs.String(&s.memory.Path, "db", "", "bbolt file for memory and saved tools (default STATE_DIR/codeexec.db); any number of codeexec processes may share it", "CODEEXEC_DB")
	bindStoreURL(fs, &s.memory.Store, "store", "PostgreSQL URL for memory, saved tools and session checkpoints instead of the bbolt file, "+
		"e.g. postgres://codeexec@db1,db2/codeexec?target_session_attrs=read-write&sslmode=verify-full; "+
		"the password comes from PGPASSWORD, a PGPASSFILE or --store-password-file, never from the URL on the command line", "CODEEXEC_STORE", getenv)
	fs.String(&s.memory.StorePasswordFile, "store-password-file", "", "file holding the PostgreSQL password (read for each new connection, so a rotated secret is picked up)", "CODEEXEC_STORE_PASSWORD_FILE")
	fs.Duration(&s.memory.StoreWait, "store-wait", memoryd.DefaultStoreWait, "with --store: how long a call waits while the database is unreachable or failing over, and how long memoryd waits for it at start", "CODEEXEC_STORE_WAIT")
}

// bindStoreURL binds a database URL flag whose default comes from env.
// A URL given on the command line must not carry a password: every user
// of the machine sees the command line in ps.
func bindStoreURL(fs *flagenv.Set, p *string, name, usage, env string, getenv func(string) string) {
	*p = strings.TrimSpace(getenv(env))
	fs.Var(storeURL{p: p, name: name, fs: fs}, name, usage+" (env "+env+")")
}

// storeURL is a flag.Value for a database URL. Set never fails, since the
// flag package would print the value, password included, in its message;
// it records the problem for flagenv.Set.Err instead.
type storeURL struct {
	p    *string
	name string
	fs   *flagenv.Set
}

func (u storeURL) String() string {
	if u.p == nil {
		return ""
	}
	return redactURL(*u.p)
}

func (u storeURL) Set(v string) error {
	*u.p = v
	if urlHasPassword(v) {
		u.fs.Fail(fmt.Errorf("--%s: the URL carries a password, which every user of this machine can read in ps; "+
			"drop it from the URL and pass it as PGPASSWORD, in a PGPASSFILE (~/.pgpass), or in a file named by --store-password-file, "+
			"or pass the whole URL as CODEEXEC_STORE", u.name))
	}
	return nil
}

// urlHasPassword reports whether a postgres:// URL names a password, in
// its user info (user:password@) or as a password= parameter.
func urlHasPassword(v string) bool {
	rest, ok := strings.CutPrefix(v, "postgres://")
	if !ok {
		if rest, ok = strings.CutPrefix(v, "postgresql://"); !ok {
			// key=value connection strings are refused by
			// memoryd.Config.Validate; look for the key anyway.
			return strings.Contains(v, "password=")
		}
	}
	authority, query, _ := strings.Cut(rest, "?")
	authority, _, _ = strings.Cut(authority, "/")
	if at := strings.LastIndex(authority, "@"); at >= 0 && strings.Contains(authority[:at], ":") {
		return true
	}
	for _, kv := range strings.Split(query, "&") {
		if k, _, _ := strings.Cut(kv, "="); k == "password" {
			return true
		}
	}
	return false
}

// redactURL drops the password from a URL, for help text and reports.
func redactURL(v string) string {
	scheme, rest, ok := strings.Cut(v, "://")
	if !ok {
		return v
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if user, _, hasPW := strings.Cut(authority[:at], ":"); hasPW {
			authority = user + ":xxxxx" + authority[at:]
		}
	}
	if path, query, hasQuery := strings.Cut(tail, "?"); hasQuery {
		parts := strings.Split(query, "&")
		for i, kv := range parts {
			if k, _, _ := strings.Cut(kv, "="); k == "password" {
				parts[i] = "password=xxxxx"
			}
		}
		tail = path + "?" + strings.Join(parts, "&")
	}
	return scheme + "://" + authority + tail
}

// bindDiscovery binds discoveryd's settings. The config sources are found
// from the home and working directories, as upstream finds them.
func bindDiscovery(fs *flagenv.Set, c *discoveryd.Config, getenv func(string) string) {
	c.Home = getenv("HOME")
	c.Cwd, _ = os.Getwd()
	c.Getenv = getenv
	fs.String(&c.ServersConfig, "servers-config", "", "extra JSON or TOML file of mcpServers, loaded after every other source", "MCP_SERVERS_CONFIG")
	fs.Bool(&c.AllowSelfServer, "allow-self-server", false, "keep server configs that would launch codeexec itself", "MCP_BRIDGE_ALLOW_SELF_SERVER")
	fs.Duration(&c.CallTimeout, "tool-timeout", discoveryd.DefaultCallTimeout, "timeout of one upstream MCP tool call", "CODEEXEC_TOOL_TIMEOUT")
	fs.Duration(&c.SearchIndexWait, "search-index-wait", discoveryd.DefaultSearchIndexWait, "how long a search waits for servers that have not listed their tools yet", "CODEEXEC_SEARCH_INDEX_WAIT")
	fs.Duration(&c.StartTimeout, "server-start-timeout", discoveryd.DefaultStartTimeout, "timeout for starting an upstream MCP server", "CODEEXEC_SERVER_START_TIMEOUT")
}

// bindMemory binds memoryd's own settings.
func bindMemory(fs *flagenv.Set, s *stores) {
	fs.Duration(&s.memory.OwnerWait, "owner-wait", memoryd.DefaultOwnerWait, "when the process that serves a shared database exits, how long calls wait for another to take it over", "CODEEXEC_OWNER_WAIT")
	fs.Bytes(&s.maxValue, "max-value", memoryd.DefaultMaxValueBytes, "largest memory value or saved tool, e.g. 1m", "CODEEXEC_MEMORY_MAX_VALUE")
}

// memoryConfig resolves the database path against the state dir.
func (s *stores) memoryConfig() memoryd.Config {
	cfg := s.memory
	if cfg.Path == "" {
		cfg.Path = filepath.Join(s.stateDir, "codeexec.db")
	}
	cfg.MaxValueBytes = int(s.maxValue)
	cfg.Version = version
	return cfg
}

// localMemory runs memoryd in this process on the state dir's database
// (sharing it with any codeexec that holds it) and returns a connection
// to it, for the commands that work on the local database.
func (s *stores) localMemory(ctx context.Context, logger *slog.Logger) (*grpc.ClientConn, func(), error) {
	svc, err := memoryd.New(s.memoryConfig(), logger)
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

// open starts memoryd (and discoveryd) in-process, registered on inproc,
// and returns clients that reach them through it.
func (s *stores) open(ctx context.Context, inproc *suite.InProcess, reg *prometheus.Registry, logger *slog.Logger) (sandboxd.Deps, func(), error) {
	mcfg := s.memoryConfig()
	mcfg.Registerer = reg
	mem, err := memoryd.New(mcfg, logger.With("service", "memoryd"))
	if err != nil {
		return sandboxd.Deps{}, nil, err
	}
	importUpstreamOnFirstStart(ctx, mem, s.stateDir, logger.With("service", "memoryd"))
	mem.Register(inproc.Server.GRPC)
	s.discovery.Registerer = reg
	disc, err := discoveryd.New(s.discovery, logger.With("service", "discoveryd"))
	if err != nil {
		_ = mem.Close()
		return sandboxd.Deps{}, nil, err
	}
	disc.Register(inproc.Server.GRPC)
	deps := sandboxd.Deps{
		Discovery: discoveryv1.NewDiscoveryServiceClient(inproc.Conn),
		Memory:    memoryv1.NewMemoryServiceClient(inproc.Conn),
		Tools:     memoryv1.NewToolServiceClient(inproc.Conn),
		Registry:  reg,
	}
	return deps, func() { _ = disc.Close(); _ = mem.Close() }, nil
}
