// Package memoryd serves MemoryService and ToolService: durable memory
// records and saved Python tools, per tenant, in one bbolt file or in a
// PostgreSQL database. Details live under memoryd/internal; other
// services reach memoryd only through the generated gRPC clients.
//
// With a PostgreSQL database (Config.Store) memoryd keeps no state of its
// own: any number of memoryd processes, on any number of hosts, serve the
// same records, every write is one atomic statement in the database, and
// a multi-host URL with target_session_attrs=read-write carries calls
// over a failover to a promoted standby (they wait up to StoreWait).
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
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/memoryd/internal/catalog"
	"github.com/codeexec/codeexec/memoryd/internal/migrate"
	"github.com/codeexec/codeexec/memoryd/internal/server"
	"github.com/codeexec/codeexec/memoryd/internal/shared"
	"github.com/codeexec/codeexec/memoryd/internal/store"
	"github.com/codeexec/codeexec/memoryd/internal/store/bolt"
	"github.com/codeexec/codeexec/memoryd/internal/store/postgres"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/services/dial"
)

// DefaultMaxValueBytes is the default cap on one value, metadata object or
// tool source.
const DefaultMaxValueBytes = 1 << 20

// MaxMaxValueBytes is the largest allowed MaxValueBytes: half the suite's
// gRPC message limit, leaving room for the rest of the message.
const MaxMaxValueBytes = dial.MaxMessageBytes / 2

// Quotas cap what one tenant keeps in the store (server.Quotas).
type Quotas = server.Quotas

// DefaultQuotas are the quotas a tenant gets unless told otherwise: far
// past what an agent's notes need, and small enough that one tenant cannot
// fill the disk of a shared store.
var DefaultQuotas = Quotas{MemoryKeys: 10_000, MemoryBytes: 256 << 20, CheckpointBytes: 2 << 30}

// DefaultOwnerWait is how long a call waits for a process to serve the
// database when its owner has gone away: a takeover takes tens of
// milliseconds, the rest is room for a loaded machine.
const DefaultOwnerWait = shared.DefaultWait

// DefaultTenant is the tenant of requests that name none.
const DefaultTenant = server.DefaultTenant

// DefaultStoreWait is how long a call waits for an unreachable
// PostgreSQL database, a failover included.
const DefaultStoreWait = postgres.DefaultWait

// Config configures a Service.
type Config struct {
	// Path is the bbolt file. It is created with mode 0600 (and its
	// directory with 0700) when missing. It is not used when Store is
	// set.
	Path string
	// Store, when set, is a PostgreSQL connection URL (postgres://… or
	// postgresql://…, multi-host allowed): the records live there
	// instead of in Path. libpq's environment variables (PGHOST,
	// PGPASSWORD, PGPASSFILE, PGSSLMODE, …) fill in what the URL leaves
	// out, as they do for psql.
	Store string
	// StorePasswordFile, when set, holds the database password. It is
	// read for every new connection, so a rotated secret is picked up.
	StorePasswordFile string
	// StoreWait bounds how long a call waits while the database cannot
	// be reached (a failover, a restart); zero means DefaultStoreWait.
	// memoryd also waits this long for the database at start.
	StoreWait time.Duration
	// SpoolDir holds the temporary copy that a backup streams from.
	// Empty means the bbolt file's directory, or the system's temporary
	// directory with Store.
	SpoolDir string
	// MaxValueBytes caps value_json, metadata_json and tool source.
	// Zero means DefaultMaxValueBytes.
	MaxValueBytes int
	// OwnerWait bounds how long a call waits for a process to serve the
	// database after its owner went away. Zero means DefaultOwnerWait.
	OwnerWait time.Duration
	// Quotas cap what one tenant keeps: its memory keys and bytes, and its
	// session checkpoints' bytes. Zero fields set no cap; DefaultQuotas
	// are the command line's defaults.
	Quotas Quotas
	// Version is this codeexec's version. Processes that share the file
	// name each other's versions when they cannot talk.
	Version string
	// Registerer, when set, receives the service's collectors. Otherwise
	// register Collectors() yourself.
	Registerer prometheus.Registerer
}

// Validate checks the config and fills in defaults.
func (c *Config) Validate() error {
	switch {
	case c.Store != "":
		if !strings.HasPrefix(c.Store, "postgres://") && !strings.HasPrefix(c.Store, "postgresql://") {
			return errors.New("memoryd: the store must be a PostgreSQL URL, postgres://[user@]host[:port][,host2[:port]…]/database[?sslmode=…]; for a bbolt file set the database path instead")
		}
	case c.Path == "":
		return errors.New("memoryd: database path is empty; set it to a file such as ~/.local/state/codeexec/memory.db")
	}
	if c.StoreWait < 0 {
		return fmt.Errorf("memoryd: store wait is %s; use a positive duration or 0 for the default (%s)", c.StoreWait, DefaultStoreWait)
	}
	if c.StoreWait == 0 {
		c.StoreWait = DefaultStoreWait
	}
	if c.SpoolDir == "" && c.Store == "" {
		c.SpoolDir = filepath.Dir(c.Path)
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
	if q := c.Quotas; q.MemoryKeys < 0 || q.MemoryBytes < 0 || q.CheckpointBytes < 0 {
		return fmt.Errorf("memoryd: quotas %+v: each must be 0 (no cap) or positive, e.g. --quota-memory-keys %d --quota-memory-bytes 256m --quota-checkpoint-bytes 2g", q, DefaultQuotas.MemoryKeys)
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
	store   store.Store
	shared  *shared.Store // nil over PostgreSQL
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
	svc := &Service{metrics: metrics, logger: logger}
	var collectors []prometheus.Collector
	if cfg.Store != "" {
		// The database's own clock stamps records, so that every
		// memoryd sharing it agrees on times.
		ctx, cancel := context.WithTimeout(context.Background(), cfg.StoreWait)
		defer cancel()
		pg, err := postgres.Open(ctx, cfg.Store, postgres.Options{
			PasswordFile: cfg.StorePasswordFile, Wait: cfg.StoreWait, TempDir: cfg.SpoolDir,
			Version: cfg.Version, Logger: logger,
		})
		if err != nil {
			return nil, fmt.Errorf("memoryd: %w", err)
		}
		svc.store = pg
	} else {
		st, err := shared.Open(shared.Options{
			Path: cfg.Path, Bolt: bolt.Options{OnCommit: metrics.ObserveCommit},
			Version: cfg.Version, Wait: cfg.OwnerWait, Logger: logger,
		})
		if err != nil {
			return nil, err
		}
		svc.store, svc.shared = st, st
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
		collectors = append(collectors, owner, takeovers)
	}
	if cfg.Registerer != nil {
		for _, c := range append(metrics.Collectors(), collectors...) {
			if err := cfg.Registerer.Register(c); err != nil {
				_ = svc.store.Close()
				return nil, fmt.Errorf("memoryd: register metrics: %w", err)
			}
		}
	}
	svc.memory, svc.tools = server.New(server.Options{Store: svc.store, Logger: logger, Metrics: metrics, MaxValueBytes: cfg.MaxValueBytes, SpoolDir: cfg.SpoolDir, Quotas: cfg.Quotas})
	return svc, nil
}

// Register adds MemoryService, ToolService, SessionStoreService and
// CatalogService to g.
func (s *Service) Register(g *grpc.Server) {
	server.Register(g, s.memory, s.tools)
	server.RegisterSessions(g, server.NewSessions(s.memory))
	catalog.New(s.store, s.logger).Register(g)
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

// Owner reports whether this process holds the bbolt file (rather than
// using it through the process that does). It is false over PostgreSQL,
// which no memoryd holds.
func (s *Service) Owner() bool { return s.shared != nil && s.shared.Owner() }

// NewDatabase reports whether this start created the bbolt database: the
// file was new, or had never been initialised. It is the moment to bring in
// an upstream user's state (ImportUpstreamOnFirstStart). A PostgreSQL store
// is a team's shared database, never an upstream user's first start: false.
func (s *Service) NewDatabase() bool { return s.shared != nil && s.shared.Created() }

// Close finishes the commit in progress and closes the database, which
// releases its lock for the next process. Call it after the gRPC server
// has stopped.
func (s *Service) Close() error { return s.store.Close() }

// What moves records between stores, files and upstream's layout; the
// work is done in internal/migrate, whose doc comments say how.
type (
	// CopyOptions configure Copy.
	CopyOptions = migrate.CopyOptions
	// CopyReport says what Copy did.
	CopyReport = migrate.CopyReport
	// CopyCount is what became of the records of one kind.
	CopyCount = migrate.CopyCount
	// Report says what ImportUpstream took and what it left behind.
	Report = migrate.Report
	// Skipped is one item ImportUpstream did not import.
	Skipped = migrate.Skipped
	// BackupTarget is where a backup goes, once CheckBackupTarget has
	// accepted it.
	BackupTarget = migrate.BackupTarget
)

// Copy copies every record of every tenant from one store (a bbolt file or
// a PostgreSQL URL) to another, keeping revisions and times; run again, it
// adds only what is new. A bbolt source may be in use (Copy reads a
// consistent snapshot through the process that holds it); a bbolt
// destination must not be.
func Copy(ctx context.Context, opts CopyOptions) (CopyReport, error) {
	return migrate.Copy(ctx, opts)
}

// BackupToFile asks a running memoryd for a consistent copy of its
// database and writes it to path (mode 0600), never leaving half a backup
// there, once CheckBackupTarget(path, "") has accepted path. It returns
// the number of bytes written.
func BackupToFile(ctx context.Context, client memoryv1.MemoryServiceClient, path string) (int64, error) {
	return migrate.BackupToFile(ctx, client, path)
}

// CheckBackupTarget checks, before memoryd is asked for a backup, that
// path can take one of the bbolt file live (empty when not known): it is
// neither live by any name nor a file another process holds locked, and
// its directory exists. A symlink is followed, and a device, a pipe or
// /dev/stdout is streamed to. BackupTarget.Write then writes the backup.
func CheckBackupTarget(path, live string) (*BackupTarget, error) {
	return migrate.CheckBackupTarget(path, live)
}

// ImportUpstream imports the upstream project's state dir (its memory
// files and user_tools.py) into tenant, through a running memoryd. Items
// memoryd refuses are skipped with the reason (Report.Skipped); a
// transport error ends the import. Records already in memoryd are left
// alone, so running it twice is safe; the upstream files are only read.
func ImportUpstream(ctx context.Context, mem memoryv1.MemoryServiceClient, tools memoryv1.ToolServiceClient, dir, tenant string) (Report, error) {
	return migrate.ImportUpstream(ctx, mem, tools, dir, tenant)
}

// HasUpstreamState reports whether dir, an upstream state dir, holds
// memories or saved tools.
func HasUpstreamState(dir string) bool { return migrate.HasUpstreamState(dir) }

// ImportUpstreamOnFirstStart imports as ImportUpstream does, for a
// database this start created (Service.NewDatabase), and logs what it
// imported and skipped. A failure is logged and returned; the caller
// carries on without the state.
func ImportUpstreamOnFirstStart(ctx context.Context, mem memoryv1.MemoryServiceClient, tools memoryv1.ToolServiceClient, dir, tenant string, logger *slog.Logger) error {
	return migrate.ImportUpstreamOnFirstStart(ctx, mem, tools, dir, tenant, logger)
}
