// Package catalog implements CatalogService: each MCP server's tool list,
// kept in memoryd's store (bbolt or PostgreSQL) under a hash of the
// server's config entry, so that every discoveryd sharing the store can
// search the server without starting it.
package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	catalogv1 "github.com/codeexec/codeexec/proto/gen/codeexec/catalog/v1"
)

// Where entries live in the store: one tenant of their own, whose kind no
// user's record ever has, so no tenant's memory or tools can collide.
const (
	tenant = "codeexec.catalog"
	kind   = store.Kind("catalog")
)

// Limits of one request.
const (
	// MaxKeys bounds the keys of one GetCatalogs.
	MaxKeys = 1000
	// MaxToolsBytes bounds one entry's tools_json: 8 MiB is some 4,000
	// tools with long schemas.
	MaxToolsBytes = 8 << 20
)

// Server implements CatalogService over a store.
type Server struct {
	catalogv1.UnimplementedCatalogServiceServer
	st     store.Store
	logger *slog.Logger
}

// New returns a Server over st. A nil logger discards logs.
func New(st store.Store, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Server{st: st, logger: logger}
}

// Register adds CatalogService to g.
func (s *Server) Register(g *grpc.Server) { catalogv1.RegisterCatalogServiceServer(g, s) }

// meta is what an entry keeps beside its tools, as the record's Meta.
type meta struct {
	Server   string `json:"server"`
	ListedAt int64  `json:"listedAtUnixMs"`
	TTLMs    *int64 `json:"ttlMs,omitempty"`
	Scope    string `json:"cacheScope,omitempty"`
}

// GetCatalogs returns the stored entries among req's keys.
func (s *Server) GetCatalogs(ctx context.Context, req *catalogv1.GetCatalogsRequest) (*catalogv1.GetCatalogsResponse, error) {
	if len(req.GetKeys()) > MaxKeys {
		return nil, status.Errorf(codes.InvalidArgument, "%d keys asked for; at most %d are allowed in one call", len(req.GetKeys()), MaxKeys)
	}
	out := &catalogv1.GetCatalogsResponse{}
	for _, k := range req.GetKeys() {
		if err := checkKey(k); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		rec, err := s.st.Get(ctx, tenant, kind, k)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, toStatus(err)
		}
		var m meta
		if err := json.Unmarshal(rec.Meta, &m); err != nil {
			// An entry this code cannot read is as good as none: the
			// server is listed again and the entry replaced.
			s.logger.WarnContext(ctx, "unreadable catalog entry", "key", k, "error", err)
			continue
		}
		out.Catalogs = append(out.Catalogs, &catalogv1.Catalog{
			Key: k, Server: m.Server, ToolsJson: string(rec.Value),
			ListedAt: timestamppb.New(time.UnixMilli(m.ListedAt)), TtlMs: m.TTLMs, CacheScope: m.Scope,
		})
	}
	return out, nil
}

// PutCatalog stores req's entry under its key.
func (s *Server) PutCatalog(ctx context.Context, req *catalogv1.PutCatalogRequest) (*catalogv1.PutCatalogResponse, error) {
	c := req.GetCatalog()
	if err := check(c); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	m, err := json.Marshal(meta{Server: c.GetServer(), ListedAt: c.GetListedAt().AsTime().UnixMilli(), TTLMs: c.TtlMs, Scope: c.GetCacheScope()})
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if _, err := s.st.Put(ctx, tenant, kind, c.GetKey(), store.Write{Value: []byte(c.GetToolsJson()), Meta: m}); err != nil {
		return nil, toStatus(err)
	}
	return &catalogv1.PutCatalogResponse{}, nil
}

// check says what is wrong with an entry, if anything.
func check(c *catalogv1.Catalog) error {
	if c == nil {
		return errors.New("catalog is missing")
	}
	if err := checkKey(c.GetKey()); err != nil {
		return err
	}
	if len(c.GetToolsJson()) > MaxToolsBytes {
		return fmt.Errorf("tools_json is %d bytes; at most %d are allowed", len(c.GetToolsJson()), MaxToolsBytes)
	}
	var tools []json.RawMessage
	if err := json.Unmarshal([]byte(c.GetToolsJson()), &tools); err != nil {
		return fmt.Errorf("tools_json is not a JSON array of tools: %w", err)
	}
	if c.GetListedAt() == nil || c.GetListedAt().CheckValid() != nil {
		return errors.New("listed_at is missing or not a valid time")
	}
	if c.TtlMs != nil && c.GetTtlMs() < 0 {
		return fmt.Errorf("ttl_ms is %d; use 0 or more, or leave it unset", c.GetTtlMs())
	}
	switch c.GetCacheScope() {
	case "", "public", "private":
	default:
		return fmt.Errorf("cache_scope is %q; use \"public\", \"private\" or leave it empty", c.GetCacheScope())
	}
	return nil
}

// checkKey accepts 64 lowercase hex digits, a SHA-256.
func checkKey(k string) error {
	if len(k) != 64 {
		return fmt.Errorf("key %q is not 64 lowercase hex digits (a SHA-256 of the server's config entry)", k)
	}
	for _, r := range k {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return fmt.Errorf("key %q is not 64 lowercase hex digits (a SHA-256 of the server's config entry)", k)
		}
	}
	return nil
}

// toStatus maps a store error to a gRPC status.
func toStatus(err error) error {
	switch {
	case errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrTooLarge):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, store.ErrClosed), errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrLocked):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
