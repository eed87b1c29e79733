// Package discoveryd serves DiscoveryService: it reads the user's MCP server
// configs, starts the upstream MCP clients on first use and keeps them
// warm, answers list, docs and search questions about their tools, and
// proxies tool calls. Details live under discoveryd/internal; other
// services reach discoveryd only through the generated gRPC client.
package discoveryd

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/discoveryd/internal/config"
	"github.com/codeexec/codeexec/discoveryd/internal/search"
	"github.com/codeexec/codeexec/discoveryd/internal/upstream"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Defaults for Config.
const (
	// DefaultCallTimeout bounds a CallTool that names no timeout.
	DefaultCallTimeout = 60 * time.Second
	// DefaultStartTimeout bounds starting a server. npx servers may have to
	// download their package first.
	DefaultStartTimeout = 60 * time.Second
	// MaxCallTimeout caps the timeout a caller may ask for.
	MaxCallTimeout = 10 * time.Minute
	// DefaultSearchIndexWait bounds how long an unfiltered search waits for
	// servers that were never listed to start and list their tools. A user's
	// first search must see every server, but one slow server must not
	// stall it; the slow one keeps starting in the background and is
	// searched next time.
	DefaultSearchIndexWait = 5 * time.Second
)

// Config configures a Service. cmd/ fills it from flags and the
// environment; nothing below reads the environment itself.
type Config struct {
	// Home is the user's home directory, for the home config sources.
	Home string
	// Cwd is the directory that ./mcp-servers and ./.vscode/mcp.json are
	// resolved against.
	Cwd string
	// GOOS selects OS-specific config sources and the inherited env
	// variables. Empty means runtime.GOOS.
	GOOS string
	// ServersConfig is MCP_SERVERS_CONFIG: a JSON or TOML file loaded after
	// every other source.
	ServersConfig string
	// AllowSelfServer is MCP_BRIDGE_ALLOW_SELF_SERVER: keep config entries
	// that would start this bridge again.
	AllowSelfServer bool
	// Getenv resolves ${VAR} in configs and supplies the small default
	// environment (PATH, HOME, LANG…) that stdio servers inherit. Nil means
	// an empty environment.
	Getenv func(string) string
	// CallTimeout is the default per-call timeout; 0 means
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// StartTimeout bounds a server's start and handshake; 0 means
	// DefaultStartTimeout.
	StartTimeout time.Duration
	// SearchIndexWait bounds how long an unfiltered SearchTools waits for
	// unlisted servers to be indexed (less when the request's deadline is
	// sooner); 0 means DefaultSearchIndexWait.
	SearchIndexWait time.Duration
	// Registerer, when set, receives the service's metrics: tool-call and
	// search latency, and tokens spared.
	Registerer prometheus.Registerer
}

// Validate checks the config and fills in defaults.
func (c *Config) Validate() error {
	if c.CallTimeout < 0 || c.CallTimeout > MaxCallTimeout {
		return fmt.Errorf("discoveryd: call timeout %s is out of range; use 1s..%s, or 0 for the default (%s)", c.CallTimeout, MaxCallTimeout, DefaultCallTimeout)
	}
	if c.StartTimeout < 0 {
		return fmt.Errorf("discoveryd: start timeout %s is negative; use a positive duration or 0 for the default (%s)", c.StartTimeout, DefaultStartTimeout)
	}
	if c.SearchIndexWait < 0 {
		return fmt.Errorf("discoveryd: search index wait %s is negative; use a positive duration or 0 for the default (%s)", c.SearchIndexWait, DefaultSearchIndexWait)
	}
	if c.SearchIndexWait == 0 {
		c.SearchIndexWait = DefaultSearchIndexWait
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.GOOS == "" {
		c.GOOS = runtime.GOOS
	}
	if c.Getenv == nil {
		c.Getenv = func(string) string { return "" }
	}
	return nil
}

func (c *Config) lookup(k string) (string, bool) {
	v := c.Getenv(k)
	return v, v != ""
}

func (c *Config) loadOptions() config.Options {
	return config.Options{Home: c.Home, Cwd: c.Cwd, GOOS: c.GOOS, ServersConfig: c.ServersConfig, AllowSelf: c.AllowSelfServer, Lookup: c.lookup}
}

// Service implements DiscoveryService.
type Service struct {
	discoveryv1.UnimplementedDiscoveryServiceServer

	cfg     Config
	logger  *slog.Logger
	mgr     *upstream.Manager
	metrics *metrics

	mu       sync.Mutex
	warnings []string
	alias    map[string]string // server name → alias
	byAlias  map[string]string // alias → server name

	indexMu    sync.Mutex
	index      *search.Index
	indexDirty atomic.Bool

	// indexing holds the background listings that searches started, one
	// per server, so that concurrent searches share them.
	indexingMu sync.Mutex
	indexing   map[string]*indexAttempt
}

// New loads the server configs. No server is started until it is used.
// Broken config files are logged and reported by ListServers; they do not
// make New fail. A nil logger discards logs.
func New(cfg Config, logger *slog.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, logger: logger, alias: map[string]string{}, byAlias: map[string]string{}, indexing: map[string]*indexAttempt{}, metrics: newMetrics()}
	s.indexDirty.Store(true)
	if cfg.Registerer != nil {
		if err := s.registerMetrics(cfg.Registerer); err != nil {
			return nil, fmt.Errorf("discoveryd metrics: %w", err)
		}
	}
	s.mgr = upstream.New(nil, upstream.Options{
		BaseEnv:        upstream.DefaultEnv(cfg.GOOS, cfg.lookup),
		CallTimeout:    cfg.CallTimeout,
		StartTimeout:   cfg.StartTimeout,
		OnToolsChanged: func(string) { s.indexDirty.Store(true) },
	}, logger)
	s.rescan()
	return s, nil
}

// rescan reads the config sources and adds servers with new names, as
// upstream's additive re-scan does.
func (s *Service) rescan() {
	res := config.Load(s.cfg.loadOptions())
	added := s.mgr.Add(res.Servers)
	warnings := make([]string, 0, len(res.Warnings))
	for _, w := range res.Warnings {
		warnings = append(warnings, w.String())
		s.logger.Warn("MCP server config problem", logkeys.ConfigPath, w.Path, logkeys.MCPServer, w.Server, logkeys.Error, w.Reason)
	}
	for _, w := range res.Skipped {
		s.logger.Debug("MCP server config entry skipped", logkeys.ConfigPath, w.Path, logkeys.MCPServer, w.Server, "reason", w.Reason)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.warnings = warnings
	taken := map[string]bool{}
	for a := range s.byAlias {
		taken[a] = true
	}
	for _, name := range added { // sorted, so aliases are stable
		a := uniqueAlias(serverAliasBase(name), taken)
		s.alias[name], s.byAlias[a] = a, name
	}
	if len(added) > 0 {
		s.logger.Info("MCP servers configured", "added", added)
	}
}

// resolve maps a server name or alias to its name. Unknown input is
// returned unchanged, so that the manager's error names the choices.
func (s *Service) resolve(nameOrAlias string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.alias[nameOrAlias]; ok {
		return nameOrAlias
	}
	if n, ok := s.byAlias[nameOrAlias]; ok {
		return n
	}
	return nameOrAlias
}

func (s *Service) serverAlias(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.alias[name]
}

// Register adds the service to a gRPC server.
func (s *Service) Register(g *grpc.Server) {
	discoveryv1.RegisterDiscoveryServiceServer(g, s)
}

// Close stops every upstream server and waits until their processes are
// gone.
func (s *Service) Close() error {
	return errors.Join(s.mgr.Close())
}
