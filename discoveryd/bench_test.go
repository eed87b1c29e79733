package discoveryd_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
)

// BenchmarkCallTool measures one echo call to the fake stdio server through
// discoveryd (gRPC over bufconn, then MCP), and directly with an mcp-go
// client; the difference is what discoveryd adds to a proxied call.
func BenchmarkCallTool(b *testing.B) {
	b.Run("via-discoveryd", func(b *testing.B) {
		e := start(b, map[string]any{"fake": fakeServer(b)}, nil)
		req := &discoveryv1.CallToolRequest{Server: "fake", Tool: "echo", ArgumentsJson: `{"text": "x"}`}
		if _, err := e.client.CallTool(b.Context(), req); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			if _, err := e.client.CallTool(b.Context(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("direct-mcp-go", func(b *testing.B) {
		script, _ := filepath.Abs(filepath.Join("internal", "upstream", "testdata", "fakeserver.py"))
		c, err := client.NewStdioMCPClient(python3(b), nil, script)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		init := mcp.InitializeRequest{}
		init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
		if _, err := c.Initialize(context.Background(), init); err != nil {
			b.Fatal(err)
		}
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "echo", map[string]any{"text": "x"}
		b.ResetTimer()
		for b.Loop() {
			if _, err := c.CallTool(b.Context(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
