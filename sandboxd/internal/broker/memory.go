package broker

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/sandboxd/internal/channel"
)

// record is a memory record in upstream's shape, plus the revision that
// update_memory needs for its compare-and-swap.
type record struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value,omitempty"`
	Metadata  json.RawMessage `json:"metadata"`
	CreatedAt float64         `json:"created_at"`
	UpdatedAt float64         `json:"updated_at"`
	Revision  uint64          `json:"revision"`
}

func epoch(ts *timestamppb.Timestamp) float64 {
	if ts == nil {
		return 0
	}
	return float64(ts.GetSeconds()) + float64(ts.GetNanos())/1e9
}

func toRecord(r *memoryv1.MemoryRecord, withValue bool) *record {
	if r == nil {
		return nil
	}
	out := &record{Key: r.GetKey(), Metadata: json.RawMessage(orEmptyObject(r.GetMetadataJson())),
		CreatedAt: epoch(r.GetCreateTime()), UpdatedAt: epoch(r.GetUpdateTime()), Revision: r.GetRevision()}
	if withValue {
		out.Value = json.RawMessage(r.GetValueJson())
	}
	return out
}

// deleted is the result of memory.delete and tool.delete.
type deleted struct {
	Deleted bool `json:"deleted"`
}

// toolName is tool.save's result.
type toolName struct {
	Name string `json:"name"`
}

// metadataText is the metadata to store: "" when none was given.
func metadataText(m json.RawMessage) string {
	if len(m) == 0 || string(m) == "null" {
		return ""
	}
	return string(m)
}

func (b *Broker) saveMemory(ctx context.Context, o *origin, r *channel.SaveMemoryRequest) (*record, error) {
	resp, err := b.Memory.SaveMemory(ctx, &memoryv1.SaveMemoryRequest{Tenant: o.tenant, Key: r.Key, ValueJson: valueText(r.Value), MetadataJson: metadataText(r.Metadata)})
	if err != nil {
		return nil, err
	}
	return toRecord(resp.GetRecord(), false), nil
}

// loadMemory serves memory.load: a missing key is a null result, not an
// error.
func (b *Broker) loadMemory(ctx context.Context, o *origin, r *channel.LoadMemoryRequest) (*record, error) {
	resp, err := b.Memory.GetMemory(ctx, &memoryv1.GetMemoryRequest{Tenant: o.tenant, Key: r.Key})
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return toRecord(resp.GetRecord(), true), nil
}

// updateMemory serves memory.update, which fails with CodeConflict when
// the record is no longer at the request's revision.
func (b *Broker) updateMemory(ctx context.Context, o *origin, r *channel.UpdateMemoryRequest) (*record, error) {
	resp, err := b.Memory.UpdateMemory(ctx, &memoryv1.UpdateMemoryRequest{Tenant: o.tenant, Key: r.Key, ValueJson: valueText(r.Value), ExpectedRevision: r.Revision})
	if err != nil {
		return nil, err
	}
	return toRecord(resp.GetRecord(), true), nil
}

func (b *Broker) deleteMemory(ctx context.Context, o *origin, r *channel.DeleteMemoryRequest) (deleted, error) {
	resp, err := b.Memory.DeleteMemory(ctx, &memoryv1.DeleteMemoryRequest{Tenant: o.tenant, Key: r.Key})
	return deleted{resp.GetDeleted()}, err
}

func (b *Broker) listMemories(ctx context.Context, o *origin, _ *channel.ListMemoriesRequest) ([]*record, error) {
	resp, err := b.Memory.ListMemories(ctx, &memoryv1.ListMemoriesRequest{Tenant: o.tenant})
	if err != nil {
		return nil, err
	}
	out := make([]*record, 0, len(resp.GetRecords()))
	for _, r := range resp.GetRecords() {
		out = append(out, toRecord(r, false))
	}
	return out, nil
}

func (b *Broker) saveTool(ctx context.Context, o *origin, r *channel.SaveToolRequest) (toolName, error) {
	resp, err := b.Tools.SaveTool(ctx, &memoryv1.SaveToolRequest{Tenant: o.tenant, Name: r.Name, Source: r.Source, Docstring: r.Docstring})
	return toolName{resp.GetTool().GetName()}, err
}

func (b *Broker) listSavedTools(ctx context.Context, o *origin, _ *channel.ListSavedToolsRequest) ([]channel.SavedTool, error) {
	return b.savedTools(ctx, o.tenant)
}

// SavedTools fetches the tenant's saved tools for a session's first exec
// (session.Broker). Without memoryd it returns nil and no error: the
// agent then asks with tool.list, and learns why that fails.
func (b *Broker) SavedTools(ctx context.Context, tenant string) ([]channel.SavedTool, error) {
	if b.Memory == nil || b.Tools == nil { // what needMemory refuses tool.list for
		return nil, nil
	}
	return b.savedTools(ctx, tenant)
}

func (b *Broker) savedTools(ctx context.Context, tenant string) ([]channel.SavedTool, error) {
	resp, err := b.Tools.ListTools(ctx, &memoryv1.ListToolsRequest{Tenant: tenant})
	if err != nil {
		return nil, err
	}
	out := make([]channel.SavedTool, 0, len(resp.GetTools()))
	for _, t := range resp.GetTools() {
		out = append(out, channel.SavedTool{Name: t.GetName(), Docstring: t.GetDocstring(), Source: t.GetSource()})
	}
	return out, nil
}

func (b *Broker) deleteSavedTool(ctx context.Context, o *origin, r *channel.DeleteSavedToolRequest) (deleted, error) {
	resp, err := b.Tools.DeleteTool(ctx, &memoryv1.DeleteToolRequest{Tenant: o.tenant, Name: r.Name})
	return deleted{resp.GetDeleted()}, err
}

// valueText keeps a missing value distinct from JSON null.
func valueText(v json.RawMessage) string {
	if len(v) == 0 {
		return "null"
	}
	return string(v)
}
