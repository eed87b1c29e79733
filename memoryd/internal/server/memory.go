// Package server implements memoryd's gRPC services on top of a
// store.Store: input checks, JSON rules, status codes and metrics.
package server

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
)

// Options configure New.
type Options struct {
	// Store holds the records.
	Store store.Store
	// Logger receives internal errors.
	Logger *slog.Logger
	// Metrics records operation latencies.
	Metrics *Metrics
	// MaxValueBytes caps value_json, metadata_json and tool source.
	MaxValueBytes int
	// SpoolDir holds Backup's temporary copy; the database's directory
	// is a good choice, since it is private and on the same disk.
	SpoolDir string
	// Quotas cap what one tenant keeps.
	Quotas Quotas
}

// Memory implements memoryv1.MemoryServiceServer.
type Memory struct {
	memoryv1.UnimplementedMemoryServiceServer
	h *handler
}

// Tools implements memoryv1.ToolServiceServer.
type Tools struct {
	memoryv1.UnimplementedToolServiceServer
	h *handler
}

// New returns both servers over one store.
func New(opts Options) (*Memory, *Tools) {
	h := &handler{store: opts.Store, logger: opts.Logger, metrics: opts.Metrics, maxValueBytes: opts.MaxValueBytes, spoolDir: opts.SpoolDir, quotas: opts.Quotas}
	return &Memory{h: h}, &Tools{h: h}
}

// Register adds both services to g.
func Register(g *grpc.Server, m *Memory, t *Tools) {
	memoryv1.RegisterMemoryServiceServer(g, m)
	memoryv1.RegisterToolServiceServer(g, t)
}

// memories are records of KindMemory; List leaves their values out.
var memories = records[*memoryv1.MemoryRecord]{kind: store.KindMemory, noun: "memory", check: tenantKey, encode: memoryRecord}

func memoryRecord(r store.Record) *memoryv1.MemoryRecord {
	return &memoryv1.MemoryRecord{
		Key:          r.Key,
		ValueJson:    string(r.Value),
		MetadataJson: string(r.Meta),
		CreateTime:   timestamppb.New(r.Created),
		UpdateTime:   timestamppb.New(r.Updated),
		Revision:     r.Revision,
		ValueBytes:   uint64(r.ValueLen),
	}
}

// checkValue applies the size cap first, so that a huge value is refused
// before it is parsed.
func (h *handler) checkValue(value string) error {
	if err := checkSize("value_json", len(value), h.maxValueBytes); err != nil {
		return err
	}
	return checkJSON("value_json", value)
}

// SaveMemory implements memoryv1.MemoryServiceServer.
func (m *Memory) SaveMemory(ctx context.Context, req *memoryv1.SaveMemoryRequest) (*memoryv1.SaveMemoryResponse, error) {
	return handle(ctx, m.h, "memory.save", func() (*memoryv1.SaveMemoryResponse, error) {
		defer m.h.lockQuota(req.GetTenant(), req.GetKey())()
		rec, err := memories.put(ctx, m.h.store, req.GetTenant(), req.GetKey(), func() (store.Write, error) {
			if err := m.h.checkValue(req.GetValueJson()); err != nil {
				return store.Write{}, err
			}
			if err := checkSize("metadata_json", len(req.GetMetadataJson()), m.h.maxValueBytes); err != nil {
				return store.Write{}, err
			}
			meta, err := checkObject("metadata_json", req.GetMetadataJson())
			if err != nil {
				return store.Write{}, err
			}
			created, updated, err := importTimes(req.GetCreateTime(), req.GetUpdateTime())
			if err != nil {
				return store.Write{}, err
			}
			if err := m.h.checkMemoryQuota(ctx, req.GetTenant(), req.GetKey(), len(req.GetValueJson()), len(meta)); err != nil {
				return store.Write{}, err
			}
			return store.Write{
				Value:   []byte(req.GetValueJson()),
				Meta:    []byte(meta),
				Created: created,
				Updated: updated,
			}, nil
		})
		return &memoryv1.SaveMemoryResponse{Record: rec}, err
	})
}

// GetMemory implements memoryv1.MemoryServiceServer.
func (m *Memory) GetMemory(ctx context.Context, req *memoryv1.GetMemoryRequest) (*memoryv1.GetMemoryResponse, error) {
	return handle(ctx, m.h, "memory.get", func() (*memoryv1.GetMemoryResponse, error) {
		rec, err := memories.get(ctx, m.h.store, req.GetTenant(), req.GetKey())
		return &memoryv1.GetMemoryResponse{Record: rec}, err
	})
}

// UpdateMemory implements memoryv1.MemoryServiceServer.
func (m *Memory) UpdateMemory(ctx context.Context, req *memoryv1.UpdateMemoryRequest) (*memoryv1.UpdateMemoryResponse, error) {
	return handle(ctx, m.h, "memory.update", func() (*memoryv1.UpdateMemoryResponse, error) {
		defer m.h.lockQuota(req.GetTenant(), req.GetKey())()
		rec, err := memories.put(ctx, m.h.store, req.GetTenant(), req.GetKey(), func() (store.Write, error) {
			if err := m.h.checkValue(req.GetValueJson()); err != nil {
				return store.Write{}, err
			}
			if err := m.h.checkMemoryQuota(ctx, req.GetTenant(), req.GetKey(), len(req.GetValueJson()), -1); err != nil {
				return store.Write{}, err
			}
			return store.Write{
				Value:         []byte(req.GetValueJson()),
				Meta:          []byte("{}"), // used only when the key is new
				KeepMeta:      true,
				CheckRevision: true,
				Revision:      req.GetExpectedRevision(),
			}, nil
		})
		return &memoryv1.UpdateMemoryResponse{Record: rec}, err
	})
}

// DeleteMemory implements memoryv1.MemoryServiceServer.
func (m *Memory) DeleteMemory(ctx context.Context, req *memoryv1.DeleteMemoryRequest) (*memoryv1.DeleteMemoryResponse, error) {
	return handle(ctx, m.h, "memory.delete", func() (*memoryv1.DeleteMemoryResponse, error) {
		deleted, err := memories.delete(ctx, m.h.store, req.GetTenant(), req.GetKey())
		return &memoryv1.DeleteMemoryResponse{Deleted: deleted}, err
	})
}

// ListMemories implements memoryv1.MemoryServiceServer.
func (m *Memory) ListMemories(ctx context.Context, req *memoryv1.ListMemoriesRequest) (*memoryv1.ListMemoriesResponse, error) {
	return handle(ctx, m.h, "memory.list", func() (*memoryv1.ListMemoriesResponse, error) {
		recs, err := memories.list(ctx, m.h.store, req.GetTenant())
		return &memoryv1.ListMemoriesResponse{Records: recs}, err
	})
}
