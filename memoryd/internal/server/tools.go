package server

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
)

// A tool is stored as a record of KindTool whose Value is the source and
// whose Meta is the docstring.
func toolOf(r store.Record) *memoryv1.Tool {
	return &memoryv1.Tool{
		Name:       r.Key,
		Source:     string(r.Value),
		Docstring:  string(r.Meta),
		CreateTime: timestamppb.New(r.Created),
		UpdateTime: timestamppb.New(r.Updated),
		Revision:   r.Revision,
	}
}

// SaveTool implements memoryv1.ToolServiceServer.
func (t *Tools) SaveTool(ctx context.Context, req *memoryv1.SaveToolRequest) (*memoryv1.SaveToolResponse, error) {
	return handle(ctx, t.h, "tool.save", func() (*memoryv1.SaveToolResponse, error) {
		tenant, err := tenantTool(req.GetTenant(), req.GetName())
		if err != nil {
			return nil, err
		}
		if req.GetSource() == "" {
			return nil, fmt.Errorf("%w: source of tool %q is empty; send the function's full source", store.ErrInvalid, req.GetName())
		}
		if err := checkSize("source", len(req.GetSource()), t.h.maxValueBytes); err != nil {
			return nil, err
		}
		if err := checkSize("docstring", len(req.GetDocstring()), t.h.maxValueBytes); err != nil {
			return nil, err
		}
		rec, err := t.h.store.Put(ctx, tenant, store.KindTool, req.GetName(), store.Write{
			Value: []byte(req.GetSource()),
			Meta:  []byte(req.GetDocstring()),
		})
		if err != nil {
			return nil, err
		}
		return &memoryv1.SaveToolResponse{Tool: toolOf(rec)}, nil
	})
}

// GetTool implements memoryv1.ToolServiceServer.
func (t *Tools) GetTool(ctx context.Context, req *memoryv1.GetToolRequest) (*memoryv1.GetToolResponse, error) {
	return handle(ctx, t.h, "tool.get", func() (*memoryv1.GetToolResponse, error) {
		tenant, err := tenantTool(req.GetTenant(), req.GetName())
		if err != nil {
			return nil, err
		}
		rec, err := t.h.store.Get(ctx, tenant, store.KindTool, req.GetName())
		if err != nil {
			return nil, wrapNotFound(err, "tool", req.GetName())
		}
		return &memoryv1.GetToolResponse{Tool: toolOf(rec)}, nil
	})
}

// ListTools implements memoryv1.ToolServiceServer.
func (t *Tools) ListTools(ctx context.Context, req *memoryv1.ListToolsRequest) (*memoryv1.ListToolsResponse, error) {
	return handle(ctx, t.h, "tool.list", func() (*memoryv1.ListToolsResponse, error) {
		tenant, err := tenantOf(req.GetTenant())
		if err != nil {
			return nil, err
		}
		recs, err := t.h.store.List(ctx, tenant, store.KindTool, true)
		if err != nil {
			return nil, err
		}
		resp := &memoryv1.ListToolsResponse{Tools: make([]*memoryv1.Tool, 0, len(recs))}
		for _, r := range recs {
			resp.Tools = append(resp.Tools, toolOf(r))
		}
		return resp, nil
	})
}

// DeleteTool implements memoryv1.ToolServiceServer.
func (t *Tools) DeleteTool(ctx context.Context, req *memoryv1.DeleteToolRequest) (*memoryv1.DeleteToolResponse, error) {
	return handle(ctx, t.h, "tool.delete", func() (*memoryv1.DeleteToolResponse, error) {
		tenant, err := tenantTool(req.GetTenant(), req.GetName())
		if err != nil {
			return nil, err
		}
		deleted, err := t.h.store.Delete(ctx, tenant, store.KindTool, req.GetName(), nil)
		if err != nil {
			return nil, err
		}
		return &memoryv1.DeleteToolResponse{Deleted: deleted}, nil
	})
}
