// Package server implements DiscoveryService: it keeps the configured
// upstream MCP servers (through internal/upstream), names them and their
// tools (internal/alias), answers list, docs and search questions
// (internal/search), proxies tool calls, and maps every error to a gRPC
// status once, in toStatus.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/discoveryd/internal/alias"
	"github.com/codeexec/codeexec/discoveryd/internal/approval"
	"github.com/codeexec/codeexec/discoveryd/internal/config"
	"github.com/codeexec/codeexec/discoveryd/internal/embed"
	"github.com/codeexec/codeexec/discoveryd/internal/search"
	"github.com/codeexec/codeexec/discoveryd/internal/upstream"
	catalogv1 "github.com/codeexec/codeexec/proto/gen/codeexec/catalog/v1"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	"github.com/codeexec/codeexec/services/logkeys"
)

// MaxCallTimeout caps the timeout a caller may ask for.
const MaxCallTimeout = 10 * time.Minute

// Options configure a Server.
type Options struct {
	// Load says where the server configs are; they are read at New and
	// again on every rescan.
	Load config.Options
	// BaseEnv is the environment every stdio server starts with (see
	// upstream.DefaultEnv).
	BaseEnv map[string]string
	// CallTimeout bounds a CallTool that names no timeout; StartTimeout a
	// server's start and handshake.
	CallTimeout, StartTimeout time.Duration
	// SearchIndexWait bounds how long an unfiltered SearchTools waits for
	// unlisted servers to be indexed.
	SearchIndexWait time.Duration
	// Registerer, when set, receives the server's metrics.
	Registerer prometheus.Registerer
	// Approve are the --approve rules: the tools whose calls a person
	// must approve (besides those of config entries' "approve" keys).
	Approve []approval.Rule
	// ToolCallsPerMinute caps each tenant's calls of one tool per minute;
	// 0 is no cap.
	ToolCallsPerMinute int
	// Catalog, when set, keeps every server's tool list across processes
	// and restarts (memoryd's CatalogService), so that a search answers
	// for servers this process has not started.
	Catalog catalogv1.CatalogServiceClient
	// Model, when set, ranks searches by meaning as well as by words,
	// once it has made every tool's vector (in the background).
	Model *embed.Encoder
}

// Server implements DiscoveryService.
type Server struct {
	discoveryv1.UnimplementedDiscoveryServiceServer

	opts    Options
	logger  *slog.Logger
	mgr     *upstream.Manager
	metrics *metrics

	// scanMu serialises rescans; stamp is the config.Stamp of the last,
	// once scanned is set.
	scanMu  sync.Mutex
	stamp   string
	scanned bool

	mu       sync.Mutex
	warnings []string
	unloaded []*discoveryv1.UnloadedServer
	alias    map[string]string // server name → alias
	byAlias  map[string]string // alias → server name

	indexMu    sync.Mutex
	index      *search.Index
	indexDirty atomic.Bool

	// indexing holds the background listings that searches started, one
	// per server, so that concurrent searches share them.
	indexingMu sync.Mutex
	indexing   map[string]*indexAttempt

	// perMinute caps calls per tenant and tool.
	perMinute toolRates
	// stop ends, and bg waits for, the background check of the approval
	// rules.
	stop context.CancelFunc
	bg   sync.WaitGroup
	// stored holds the catalogue's lists of servers not listed here
	// (stored.go); asked, the config key each server was last asked by.
	storedMu      sync.Mutex
	stored        map[string]storedList
	asked         map[string]string
	catalogWrites sync.WaitGroup

	vec *vectors // the model and the tools' vectors, or nil (vectors.go)
}

// New loads the server configs. No server is started until it is used.
// Broken config files are logged and reported by ListServers; they do not
// make New fail. A nil logger discards logs.
func New(opts Options, logger *slog.Logger) (*Server, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, logger: logger, alias: map[string]string{}, byAlias: map[string]string{}, indexing: map[string]*indexAttempt{}, metrics: newMetrics(),
		stored: map[string]storedList{}, asked: map[string]string{}}
	s.indexDirty.Store(true)
	if opts.Model != nil {
		s.vec = newVectors(opts.Model)
	}
	if opts.Registerer != nil {
		if err := s.metrics.register(opts.Registerer); err != nil {
			return nil, fmt.Errorf("discoveryd metrics: %w", err)
		}
	}
	s.mgr = upstream.New(nil, upstream.Options{
		BaseEnv:      opts.BaseEnv,
		CallTimeout:  opts.CallTimeout,
		StartTimeout: opts.StartTimeout,
		OnToolsChanged: func(name string) {
			s.indexDirty.Store(true)
			s.toCatalog(name)
		},
	}, logger)
	s.rescan()
	s.perMinute.perMinute = opts.ToolCallsPerMinute
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.bg.Go(func() { s.warnUnmatched(ctx) })
	return s, nil
}

// Register adds DiscoveryService to g.
func (s *Server) Register(g *grpc.Server) {
	discoveryv1.RegisterDiscoveryServiceServer(g, s)
}

// Close stops every upstream server and waits until their processes are
// gone, and for the model's background work and the catalogue's writes.
func (s *Server) Close() error {
	s.stop()
	s.bg.Wait()
	err := s.mgr.Close()
	if s.vec != nil {
		s.vec.close()
	}
	s.catalogWrites.Wait()
	return err
}

// rescan reads the config sources and adds servers with new names, as
// upstream's additive re-scan does. Sources that did not change since
// the last rescan (config.Stamp) are not read again.
func (s *Server) rescan() {
	s.scanMu.Lock()
	defer s.scanMu.Unlock()
	stamp := config.Stamp(s.opts.Load)
	if s.scanned && stamp == s.stamp {
		return
	}
	s.stamp, s.scanned = stamp, true
	res := config.Load(s.opts.Load)
	added := s.mgr.Add(res.Servers)
	warnings := make([]string, 0, len(res.Warnings))
	for _, w := range res.Warnings {
		warnings = append(warnings, w.String())
		s.logger.Warn("MCP server config problem", logkeys.ConfigPath, w.Path, logkeys.MCPServer, w.Server, logkeys.Error, w.Reason)
	}
	for _, w := range res.Skipped {
		s.logger.Debug("MCP server config entry skipped", logkeys.ConfigPath, w.Path, logkeys.MCPServer, w.Server, "reason", w.Reason)
	}
	configured := map[string]bool{}
	for _, name := range s.mgr.Names() {
		configured[name] = true
	}
	var unloaded []*discoveryv1.UnloadedServer
	for _, w := range slices.Concat(res.Warnings, res.Skipped) {
		if w.Server != "" && !configured[w.Server] {
			unloaded = append(unloaded, &discoveryv1.UnloadedServer{Name: w.Server, Source: w.Path, Reason: w.Reason})
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.warnings, s.unloaded = warnings, unloaded
	taken := map[string]bool{}
	for a := range s.byAlias {
		taken[a] = true
	}
	for _, name := range added { // sorted, so aliases are stable
		a := alias.Unique(alias.Server(name), taken)
		s.alias[name], s.byAlias[a] = a, name
	}
	if len(added) > 0 {
		s.indexDirty.Store(true) // searches span the new servers too
		s.logger.Info("MCP servers configured", "added", added)
	}
}

// resolve maps a server name or alias to its name. Unknown input is
// returned unchanged, so that the manager's error names the choices.
func (s *Server) resolve(nameOrAlias string) string {
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

func (s *Server) serverAlias(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.alias[name]
}
