package server

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
)

// A tool is stored as a record of KindTool whose Value is the source and
// whose Meta is the docstring. List sends the source too.
var tools = records[*memoryv1.Tool]{kind: store.KindTool, noun: "tool", check: tenantTool, encode: toolOf, listValues: true}

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
		tool, err := tools.put(ctx, t.h.store, req.GetTenant(), req.GetName(), func() (store.Write, error) {
			if req.GetSource() == "" {
				return store.Write{}, fmt.Errorf("%w: source of tool %q is empty; send the function's full source", store.ErrInvalid, req.GetName())
			}
			if err := checkSize("source", len(req.GetSource()), t.h.maxValueBytes); err != nil {
				return store.Write{}, err
			}
			if err := checkSize("docstring", len(req.GetDocstring()), t.h.maxValueBytes); err != nil {
				return store.Write{}, err
			}
			return store.Write{
				Value: []byte(req.GetSource()),
				Meta:  []byte(req.GetDocstring()),
			}, nil
		})
		return &memoryv1.SaveToolResponse{Tool: tool}, err
	})
}

// GetTool implements memoryv1.ToolServiceServer.
func (t *Tools) GetTool(ctx context.Context, req *memoryv1.GetToolRequest) (*memoryv1.GetToolResponse, error) {
	return handle(ctx, t.h, "tool.get", func() (*memoryv1.GetToolResponse, error) {
		tool, err := tools.get(ctx, t.h.store, req.GetTenant(), req.GetName())
		return &memoryv1.GetToolResponse{Tool: tool}, err
	})
}

// ListTools implements memoryv1.ToolServiceServer.
func (t *Tools) ListTools(ctx context.Context, req *memoryv1.ListToolsRequest) (*memoryv1.ListToolsResponse, error) {
	return handle(ctx, t.h, "tool.list", func() (*memoryv1.ListToolsResponse, error) {
		list, err := tools.list(ctx, t.h.store, req.GetTenant())
		return &memoryv1.ListToolsResponse{Tools: list}, err
	})
}

// DeleteTool implements memoryv1.ToolServiceServer.
func (t *Tools) DeleteTool(ctx context.Context, req *memoryv1.DeleteToolRequest) (*memoryv1.DeleteToolResponse, error) {
	return handle(ctx, t.h, "tool.delete", func() (*memoryv1.DeleteToolResponse, error) {
		deleted, err := tools.delete(ctx, t.h.store, req.GetTenant(), req.GetName())
		return &memoryv1.DeleteToolResponse{Deleted: deleted}, err
	})
}
