package gateway

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/pkoukk/tiktoken-go"
	loader "github.com/pkoukk/tiktoken-go-loader"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
)

// noDiscovery is a discovery client that is never called: listing tools
// needs none, but the passthrough tools are offered only with one.
type noDiscovery struct {
	discoveryv1.DiscoveryServiceClient
}

// surfaceBudgets caps the o200k tokens of each surface's tools/list, as a
// model reads it on every turn (the whole Tool objects, hints included).
var surfaceBudgets = map[string]int{ToolsRunPython: 330, ToolsPassthrough: 330, ToolsBoth: 640}

// TestSurfaceTokens counts, with OpenAI's o200k_base encoding (offline,
// from tiktoken-go-loader), the tokens of each tool surface's definitions,
// and keeps each under its budget. The figures are in docs/APPROVALS.md.
func TestSurfaceTokens(t *testing.T) {
	t.Parallel()
	tiktoken.SetBpeLoader(loader.NewOfflineLoader())
	enc, err := tiktoken.GetEncoding(tiktoken.MODEL_O200K_BASE)
	if err != nil {
		t.Fatal(err)
	}
	for _, surface := range []string{ToolsRunPython, ToolsPassthrough, ToolsBoth} {
		g, _ := newTestGateway(t, Config{Tools: surface, Discovery: noDiscovery{}, MaxTimeout: 120 * time.Second})
		c := connect(t, g)
		list, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		total, read := 0, 0
		for _, tool := range list.Tools {
			raw, err := json.Marshal(tool)
			if err != nil {
				t.Fatal(err)
			}
			n := len(enc.Encode(string(raw), nil, nil))
			// What Anthropic's and OpenAI's APIs pass to the model: name,
			// description and schema; title and hints are the client's.
			schema, _ := json.Marshal(tool.InputSchema)
			m := len(enc.Encode(tool.Name+"\n"+tool.Description+"\n"+string(schema), nil, nil))
			t.Logf("%s: %s: %d tokens (%d of name, description and schema)", surface, tool.Name, n, m)
			total, read = total+n, read+m
		}
		t.Logf("%s: %d tools, %d tokens (%d of names, descriptions and schemas)", surface, len(list.Tools), total, read)
		if total > surfaceBudgets[surface] {
			t.Errorf("surface %s: %d tokens, over its budget of %d", surface, total, surfaceBudgets[surface])
		}
	}
}
