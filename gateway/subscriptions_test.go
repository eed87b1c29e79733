package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestHTTPListenStreamIsAcknowledged opens subscriptions/listen streams as a
// 2026-07-28 client does and wants each to begin with
// notifications/subscriptions/acknowledged, then the result. codeexec has
// nothing to subscribe to, so each stream ends at once; without mcpfix's
// listenack.go, mcp-go v1.2.1 lost the acknowledgement of about one in
// twenty.
func TestHTTPListenStreamIsAcknowledged(t *testing.T) {
	t.Parallel()
	g, _ := newTestGateway(t, Config{})
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close)

	for i := range 200 {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i + 1, "method": mcp.MethodSubscriptionsListen,
			"params": map[string]any{"notifications": map[string]any{"toolsListChanged": true},
				"_meta": map[string]any{mcp.MetaKeyProtocolVersion: mcp.ProtocolVersion20260728,
					"io.modelcontextprotocol/clientCapabilities": map[string]any{},
					mcp.MetaKeyClientInfo:                        map[string]any{"name": "t", "version": "1"}}}})
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
		req.Header.Set(mcp.HeaderMethod, string(mcp.MethodSubscriptionsListen))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var frames []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				frames = append(frames, data)
			}
		}
		_ = resp.Body.Close()
		if len(frames) != 2 {
			t.Fatalf("stream %d (%s): %d frames %q, want the acknowledgement and the result", i, resp.Header.Get("Content-Type"), len(frames), frames)
		}
		var first struct {
			Method string `json:"method"`
		}
		if err := json.Unmarshal([]byte(frames[0]), &first); err != nil || first.Method != string(mcp.MethodNotificationSubscriptionsAcknowledged) {
			t.Fatalf("stream %d begins with %s, want %s", i, frames[0], mcp.MethodNotificationSubscriptionsAcknowledged)
		}
	}
}
