package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
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

var errNoMemory = errors.New("memory and saved tools are not available in this deployment (memoryd is not configured)")

func (b *Broker) memoryCall(ctx context.Context, tenant, method string, p *callParams) (any, error) {
	if b.Memory == nil || b.Tools == nil {
		return nil, errNoMemory
	}
	key := ""
	if p.Key != nil {
		key = *p.Key
	}
	meta := ""
	if len(p.Metadata) > 0 && string(p.Metadata) != "null" {
		meta = string(p.Metadata)
	}
	switch method {
	case "memory.save":
		resp, err := b.Memory.SaveMemory(ctx, &memoryv1.SaveMemoryRequest{Tenant: tenant, Key: key, ValueJson: valueText(p.Value), MetadataJson: meta})
		if err != nil {
			return nil, rpcError(err)
		}
		return toRecord(resp.GetRecord(), false), nil
	case "memory.load":
		resp, err := b.Memory.GetMemory(ctx, &memoryv1.GetMemoryRequest{Tenant: tenant, Key: key})
		if status.Code(err) == codes.NotFound {
			return json.RawMessage("null"), nil
		}
		if err != nil {
			return nil, rpcError(err)
		}
		return toRecord(resp.GetRecord(), true), nil
	case "memory.update":
		resp, err := b.Memory.UpdateMemory(ctx, &memoryv1.UpdateMemoryRequest{Tenant: tenant, Key: key, ValueJson: valueText(p.Value), ExpectedRevision: p.Revision})
		if err != nil {
			return nil, rpcError(err)
		}
		return toRecord(resp.GetRecord(), true), nil
	case "memory.delete":
		resp, err := b.Memory.DeleteMemory(ctx, &memoryv1.DeleteMemoryRequest{Tenant: tenant, Key: key})
		if err != nil {
			return nil, rpcError(err)
		}
		return map[string]bool{"deleted": resp.GetDeleted()}, nil
	case "memory.list":
		resp, err := b.Memory.ListMemories(ctx, &memoryv1.ListMemoriesRequest{Tenant: tenant})
		if err != nil {
			return nil, rpcError(err)
		}
		out := make([]*record, 0, len(resp.GetRecords()))
		for _, r := range resp.GetRecords() {
			out = append(out, toRecord(r, false))
		}
		return out, nil
	case "tool.save":
		resp, err := b.Tools.SaveTool(ctx, &memoryv1.SaveToolRequest{Tenant: tenant, Name: p.Name, Source: p.Source, Docstring: p.Docstring})
		if err != nil {
			return nil, rpcError(err)
		}
		return map[string]string{"name": resp.GetTool().GetName()}, nil
	case "tool.list":
		resp, err := b.Tools.ListTools(ctx, &memoryv1.ListToolsRequest{Tenant: tenant})
		if err != nil {
			return nil, rpcError(err)
		}
		out := make([]map[string]string, 0, len(resp.GetTools()))
		for _, t := range resp.GetTools() {
			out = append(out, map[string]string{"name": t.GetName(), "docstring": t.GetDocstring(), "source": t.GetSource()})
		}
		return out, nil
	case "tool.delete":
		resp, err := b.Tools.DeleteTool(ctx, &memoryv1.DeleteToolRequest{Tenant: tenant, Name: p.Name})
		if err != nil {
			return nil, rpcError(err)
		}
		return map[string]bool{"deleted": resp.GetDeleted()}, nil
	}
	return nil, fmt.Errorf("unknown request %q", method)
}

// valueText keeps a missing value distinct from JSON null.
func valueText(v json.RawMessage) string {
	if len(v) == 0 {
		return "null"
	}
	return string(v)
}
