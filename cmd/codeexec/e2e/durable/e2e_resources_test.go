package durable

import (
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
	"github.com/codeexec/codeexec/gateway"
)

// The official SDK v2 client reads codeexec's one resource and an unknown
// one, in both protocol eras, over stdio and HTTP: the manual comes back,
// and the unknown read fails with the URI in error.data.uri (SEP-2164).
// Only with it does the SDK raise its ResourceNotFoundError (code -32602
// whatever the wire said; a bare -32002 stays a generic ProtocolError).
// The wire codes of each era are TestUnknownResourceErrorNamesTheURI's.
func TestE2ESDKv2ReadsResources(t *testing.T) {
	t.Parallel()
	const unknown = "resource://mcp-server-code-execution-mode/no-such-manual"
	base := harness.StartHTTP(t, harness.StateEnv(t.TempDir()))
	stdio := map[string]any{"transport": "stdio", "command": harness.Binary, "args": []string{"serve"},
		"env": envMap(harness.BaseEnv(t, harness.StateEnv(t.TempDir())))}
	http := map[string]any{"transport": "http", "url": base + "/mcp"}
	for _, tc := range []struct {
		name        string
		transport   map[string]any
		negotiation any
		version     string
	}{
		{"stdio, 2026-07-28", stdio, map[string]any{"pin": "2026-07-28"}, "2026-07-28"},
		{"stdio, session-based", stdio, "legacy", "2025-11-25"},
		{"HTTP, 2026-07-28", http, map[string]any{"pin": "2026-07-28"}, "2026-07-28"},
		{"HTTP, session-based", http, "legacy", "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := map[string]any{"negotiation": tc.negotiation, "reads": []string{gateway.CapabilitiesURI, unknown}}
			for k, v := range tc.transport {
				spec[k] = v
			}
			out := harness.SDKClient(t, spec)
			if out.ProtocolVersion != tc.version {
				t.Errorf("negotiated %q, want %q", out.ProtocolVersion, tc.version)
			}
			if len(out.Reads) != 2 {
				t.Fatalf("reads: %+v, want two", out.Reads)
			}
			if r := out.Reads[0]; r.Result == nil || len(r.Result.Contents) != 1 || !strings.Contains(r.Result.Contents[0]["text"].(string), "# Code Execution MCP Capabilities") {
				t.Errorf("reading %s: %+v", gateway.CapabilitiesURI, r)
			}
			r := out.Reads[1]
			if r.Result != nil || r.Error == nil {
				t.Fatalf("reading %s: %+v, want an error", unknown, r)
			}
			if !r.Error.ResourceNotFound || r.Error.Code != -32602 || r.Error.Data["uri"] != unknown {
				t.Errorf("reading %s: error %d %q, data %v, ResourceNotFoundError %v; want the SDK's ResourceNotFoundError (-32602) with data.uri %q",
					unknown, r.Error.Code, r.Error.Message, r.Error.Data, r.Error.ResourceNotFound, unknown)
			}
		})
	}
}
