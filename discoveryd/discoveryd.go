// Package discoveryd serves DiscoveryService: it reads the user's MCP server
// configs, starts the upstream MCP clients on first use and keeps them
// warm, answers list, docs and search questions about their tools, and
// proxies tool calls. Details live under discoveryd/internal: server (the
// handlers, the tool catalog, search indexing, tenants, errors, metrics),
// config (the config sources and client layouts), upstream (the MCP
// clients), search (the ranking) and alias (the names the sandbox uses).
// Other services reach discoveryd only through the generated gRPC client.
package discoveryd

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/discoveryd/internal/approval"
	"github.com/codeexec/codeexec/discoveryd/internal/config"
	"github.com/codeexec/codeexec/discoveryd/internal/embed"
	"github.com/codeexec/codeexec/discoveryd/internal/server"
	"github.com/codeexec/codeexec/discoveryd/internal/upstream"
	catalogv1 "github.com/codeexec/codeexec/proto/gen/codeexec/catalog/v1"
)

// Defaults for Config.
const (
	// DefaultCallTimeout bounds a CallTool that names no timeout.
	DefaultCallTimeout = 60 * time.Second
	// DefaultStartTimeout bounds starting a server. npx servers may have to
	// download their package first.
	DefaultStartTimeout = 60 * time.Second
	// MaxCallTimeout caps the timeout a caller may ask for.
	MaxCallTimeout = server.MaxCallTimeout
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
	// Executable is the path of the running binary (os.Executable): an
	// entry that starts that file under another name or path is this
	// bridge too. Empty recognises it by name only.
	Executable string
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
	// Approve marks the tools whose calls a person must approve (--approve):
	// SERVER.TOOL globs, or "destructive" for every tool whose
	// destructiveHint is true or whose readOnlyHint is not. A config
	// entry's "approve" key adds its own server's.
	Approve []string
	// ToolCallsPerMinute caps each tenant's calls of one tool per minute;
	// 0 is no cap.
	ToolCallsPerMinute int

	// approve is Approve, parsed by Validate.
	approve []approval.Rule
	// Catalog, when set, is memoryd's CatalogService: every server's tool
	// list kept across processes and restarts, so that a search answers
	// for servers not started yet.
	Catalog catalogv1.CatalogServiceClient
	// SearchModel is the directory of the search model (installed by
	// scripts/search-model.sh); empty looks in the default place
	// (DefaultSearchModelPath), "off" ranks by words only. A missing
	// model, or one that cannot run here (a build without cgo), is not an
	// error: search ranks by words only and says so once.
	SearchModel string
}

// DefaultSearchModelPath is where scripts/search-model.sh installs the
// search model: $CODEEXEC_SEARCH_MODEL, else under $XDG_DATA_HOME or
// ~/.local/share, in codeexec/.
func DefaultSearchModelPath() string { return embed.DefaultPath() }

// models holds the search models opened in this process, by path: each
// is opened, and its absence logged, once, however many services start.
var models sync.Map // path → *modelOnce

type modelOnce struct {
	once sync.Once
	enc  *embed.Encoder
}

// loadModel opens the search model at path, or returns nil, having said
// why in the log once, when there is none or it cannot run here.
func loadModel(path string, logger *slog.Logger) *embed.Encoder {
	if path == "off" {
		logger.Info("search model turned off; tool search ranks by words only")
		return nil
	}
	if path == "" {
		path = embed.DefaultPath()
	}
	m, _ := models.LoadOrStore(path, &modelOnce{})
	mo := m.(*modelOnce) //nolint:forcetypeassert // the map holds only *modelOnce
	mo.once.Do(func() {
		enc, err := embed.Open(path)
		switch {
		case errors.Is(err, embed.ErrNoRuntime):
			logger.Warn("the search model cannot run here; tool search ranks by words only", "path", path, "error", err)
		case errors.Is(err, fs.ErrNotExist):
			logger.Info("no search model installed; tool search ranks by words only. Install it with scripts/search-model.sh", "path", path)
		case err != nil:
			logger.Warn("cannot load the search model; tool search ranks by words only", "path", path, "error", err)
		default:
			logger.Info("search model loaded", "path", path, "model", enc.ID(), "dims", enc.Dims())
			mo.enc = enc
		}
	})
	return mo.enc
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
	if c.ToolCallsPerMinute < 0 {
		return fmt.Errorf("discoveryd: tool calls per minute %d is negative; use a positive number, or 0 for no cap", c.ToolCallsPerMinute)
	}
	var err error
	if c.approve, err = approval.ParseFlags(c.Approve); err != nil {
		return fmt.Errorf("discoveryd: %w", err)
	}
	if m := c.SearchModel; m != "" && m != "off" && !filepath.IsAbs(m) {
		return fmt.Errorf("discoveryd: search model path %q is not absolute; give an absolute path, \"off\", or nothing for the default (%s)", m, DefaultSearchModelPath())
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

// lookup resolves an environment variable through Getenv; empty counts
// as unset.
func (c *Config) lookup(k string) (string, bool) {
	v := c.Getenv(k)
	return v, v != ""
}

// Service is a running discoveryd: the configured servers and the
// DiscoveryService handlers over them.
type Service struct {
	srv *server.Server
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
	srv, err := server.New(server.Options{
		Load: config.Options{
			Home: cfg.Home, Cwd: cfg.Cwd, GOOS: cfg.GOOS, ServersConfig: cfg.ServersConfig,
			AllowSelf: cfg.AllowSelfServer, Self: cfg.Executable, Lookup: cfg.lookup,
		},
		BaseEnv:         upstream.DefaultEnv(cfg.GOOS, cfg.lookup),
		CallTimeout:     cfg.CallTimeout,
		StartTimeout:    cfg.StartTimeout,
		SearchIndexWait: cfg.SearchIndexWait,
		Registerer:      cfg.Registerer,
		Catalog:         cfg.Catalog,
		Model:           loadModel(cfg.SearchModel, logger),
		Approve:         cfg.approve,

		ToolCallsPerMinute: cfg.ToolCallsPerMinute,
	}, logger)
	if err != nil {
		return nil, err
	}
	return &Service{srv: srv}, nil
}

// Register adds DiscoveryService to g.
func (s *Service) Register(g *grpc.Server) { s.srv.Register(g) }

// Close stops every upstream server and waits until their processes are
// gone. Call it after the gRPC server has stopped.
func (s *Service) Close() error { return s.srv.Close() }
