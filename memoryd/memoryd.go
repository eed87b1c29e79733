// Package memoryd serves MemoryService and ToolService: durable memory
// records and saved Python tools, per tenant, in one bbolt file. Details
// live under memoryd/internal; other services reach memoryd only through
// the generated gRPC clients.
//
// Any number of processes can run memoryd on one file at once: the first
// to lock it owns it and serves its store to the others on a unix socket
// beside it, and when the owner goes away another takes over
// (internal/shared). Each process's handlers validate their own calls.
//
// Durability: a write is acknowledged only after its bbolt transaction has
// committed with fsync (NoSync stays false). Concurrent writes share
// transactions through a group commit (internal/store), so 16 writers get
// several times the single-writer rate without weakening that promise.
// The handlers see storage only through the narrow store.Store interface,
// so a replicated store can replace bbolt without touching them.
package memoryd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/memoryd/internal/server"
	"github.com/codeexec/codeexec/memoryd/internal/shared"
	"github.com/codeexec/codeexec/memoryd/internal/store"
	"github.com/codeexec/codeexec/services/dial"
)

// DefaultMaxValueBytes is the default cap on one value, metadata object or
// tool source.
const DefaultMaxValueBytes = 1 << 20

// MaxMaxValueBytes is the largest allowed MaxValueBytes: half the suite's
// gRPC message limit, leaving room for the rest of the message.
const MaxMaxValueBytes = dial.MaxMessageBytes / 2

// DefaultOwnerWait is how long a call waits for a process to serve the
// database when its owner has gone away: a takeover takes tens of
// milliseconds, the rest is room for a loaded machine.
const DefaultOwnerWait = shared.DefaultWait

// DefaultTenant is the tenant of requests that name none.
const DefaultTenant = server.DefaultTenant

// Config configures a Service.
type Config struct {
	// Path is the bbolt file. It is created with mode 0600 (and its
	// directory with 0700) when missing.
	Path string
	// MaxValueBytes caps value_json, metadata_json and tool source.
	// Zero means DefaultMaxValueBytes.
	MaxValueBytes int
	// OwnerWait bounds how long a call waits for a process to serve the
	// database after its owner went away. Zero means DefaultOwnerWait.
	OwnerWait time.Duration
	// Version is this codeexec's version. Processes that share the file
	// name each other's versions when they cannot talk.
	Version string
	// Registerer, when set, receives the service's collectors. Otherwise
	// register Collectors() yourself.
	Registerer prometheus.Registerer
}

// Validate checks the config and fills in defaults.
func (c *Config) Validate() error {
	if c.Path == "" {
		return errors.New("memoryd: database path is empty; set it to a file such as ~/.local/state/codeexec/memory.db")
	}
	if c.MaxValueBytes < 0 {
		return fmt.Errorf("memoryd: max value bytes is %d; use a positive number or 0 for the default (%d)", c.MaxValueBytes, DefaultMaxValueBytes)
	}
	if c.MaxValueBytes == 0 {
		c.MaxValueBytes = DefaultMaxValueBytes
	}
	if c.MaxValueBytes > MaxMaxValueBytes {
		return fmt.Errorf("memoryd: max value bytes is %d; the most allowed is %d, since a value must fit in one gRPC message of the suite", c.MaxValueBytes, MaxMaxValueBytes)
	}
	if c.OwnerWait < 0 {
		return fmt.Errorf("memoryd: owner wait is %s; use a positive duration or 0 for the default (%s)", c.OwnerWait, DefaultOwnerWait)
	}
	if c.OwnerWait == 0 {
		c.OwnerWait = DefaultOwnerWait
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	return nil
}

// Service is a running memoryd: an open store and its gRPC handlers.
type Service struct {
	store   *shared.Store
	memory  *server.Memory
	tools   *server.Tools
	metrics *server.Metrics
	logger  *slog.Logger
}

// New opens the database and builds the handlers. When another process
// holds the database, the handlers use it through that process.
func New(cfg Config, logger *slog.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	metrics := server.NewMetrics()
	st, err := shared.Open(shared.Options{
		Path: cfg.Path, Bolt: store.BoltOptions{OnCommit: metrics.ObserveCommit},
		Version: cfg.Version, Wait: cfg.OwnerWait, Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	if cfg.Registerer != nil {
		owner := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "codeexec", Subsystem: "memoryd", Name: "database_owner",
			Help: "1 when this process holds the memory database and serves it to the others that share it, 0 when it uses it through the process that does.",
		}, func() float64 {
			if st.Owner() {
				return 1
			}
			return 0
		})
		takeovers := prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "codeexec", Subsystem: "memoryd", Name: "database_takeovers_total",
			Help: "Times this process took the memory database over after its owner went away.",
		}, func() float64 { return float64(st.Takeovers()) })
		for _, c := range append(metrics.Collectors(), owner, takeovers) {
			if err := cfg.Registerer.Register(c); err != nil {
				_ = st.Close()
				return nil, fmt.Errorf("memoryd: register metrics: %w", err)
			}
		}
	}
	mem, tools := server.New(server.Options{Store: st, Logger: logger, Metrics: metrics, MaxValueBytes: cfg.MaxValueBytes, SpoolDir: filepath.Dir(cfg.Path)})
	return &Service{store: st, memory: mem, tools: tools, metrics: metrics, logger: logger}, nil
}

// Register adds MemoryService, ToolService and SessionStoreService to g.
func (s *Service) Register(g *grpc.Server) {
	server.Register(g, s.memory, s.tools)
	server.RegisterSessions(g, server.NewSessions(s.memory))
}

// Collectors returns the service's Prometheus collectors: the operation
// latency histogram codeexec_memoryd_op_duration_seconds{op,code}, and
// codeexec_memoryd_commit_writes and _commit_duration_seconds, which show
// how well concurrent writes share fsyncs.
func (s *Service) Collectors() []prometheus.Collector { return s.metrics.Collectors() }

// Backup writes a consistent copy of the database to w while the service
// keeps serving, and returns the number of bytes written.
func (s *Service) Backup(ctx context.Context, w io.Writer) (int64, error) {
	return s.store.Backup(ctx, w)
}

// Owner reports whether this process holds the database (rather than using
// it through the process that does).
func (s *Service) Owner() bool { return s.store.Owner() }

// Close finishes the commit in progress and closes the database, which
// releases its lock for the next process. Call it after the gRPC server
// has stopped.
func (s *Service) Close() error { return s.store.Close() }
