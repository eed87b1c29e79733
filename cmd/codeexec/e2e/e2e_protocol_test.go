package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// rpcError decodes the JSON-RPC error of an answer, failing the test if
// there is none.
func rpcError(t *testing.T, answer string) (code float64, message string) {
	t.Helper()
	var m struct {
		Error *struct {
			Code    float64 `json:"code"`
			Message string  `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(answer), &m); err != nil || m.Error == nil {
		t.Fatalf("want a JSON-RPC error, got %q (%v)", answer, err)
	}
	return m.Error.Code, m.Error.Message
}

// TestE2EBatchIsRefusedSayingSo sends a JSON-RPC batch, over HTTP and over
// stdio: it gets Invalid Request (-32600) saying that batches are not
// accepted and to send one message per POST, or per line. Before, a batch,
// which is valid JSON, got a parse error (-32700 "request body is not
// valid json", and "Failed to parse message" over stdio). The messages
// around it are answered as before.
func TestE2EBatchIsRefusedSayingSo(t *testing.T) {
	t.Parallel()
	const batch = ` [{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","id":8,"method":"ping"}]`
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		base := harness.StartHTTP(t, nil)
		r, _ := rawInitialize(t, base, nil)
		header := map[string]string{"Mcp-Session-Id": r.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": "2025-06-18"}
		resp, body := rawRequest(t, http.MethodPost, base+"/mcp", batch, header)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("a batch got HTTP %d; want 400", resp.StatusCode)
		}
		code, msg := rpcError(t, body)
		if code != -32600 || !strings.Contains(msg, "batches") || !strings.Contains(msg, "in a POST of its own") {
			t.Fatalf("a batch got %v %q; want -32600 saying batches are not accepted and to send one message per POST", code, msg)
		}
		resp, body = rawRequest(t, http.MethodPost, base+"/mcp", `{"jsonrpc":"2.0","id":9,"method":"ping"}`, header)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":9`) || strings.Contains(body, "error") {
			t.Fatalf("a ping after the batch got %d %q", resp.StatusCode, body)
		}
	})
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		s := harness.StartRawStdio(t, harness.BaseEnv(t, nil))
		t.Cleanup(func() {
			_ = s.Stdin.Close()
			_ = s.Cmd.Wait()
		})
		for _, msg := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e-raw","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			batch,
			`{"jsonrpc":"2.0","id":9,"method":"ping"}`,
		} {
			if _, err := io.WriteString(s.Stdin, msg+"\n"); err != nil {
				t.Fatal(err)
			}
		}
		var refused, pinged bool
		for (!refused || !pinged) && s.Lines.Scan() {
			line := s.Lines.Text()
			switch {
			case strings.Contains(line, `"id":null`):
				code, msg := rpcError(t, line)
				if code != -32600 || !strings.Contains(msg, "batches") || !strings.Contains(msg, "as a line of its own") {
					t.Fatalf("a batch got %v %q; want -32600 saying batches are not accepted and to send one message per line", code, msg)
				}
				refused = true
			case strings.Contains(line, `"id":9`):
				if strings.Contains(line, "error") {
					t.Fatalf("a ping after the batch got %s", line)
				}
				pinged = true
			case strings.Contains(line, `"id":7`), strings.Contains(line, `"id":8`):
				t.Fatalf("a message of the batch was answered: %s", line)
			}
		}
		if !refused || !pinged {
			t.Fatalf("the server's stdout ended (%v) before the batch and the ping were answered\n%s", s.Lines.Err(), harness.TailOf(s.Logs.String(), 4000))
		}
	})
}

// TestE2EHTTPRequestOutsideSessionIs400 makes requests of a session-based
// revision without an Mcp-Session-Id: a POST that is not initialize, and a
// DELETE. Both get 400 Bad Request, as the specification asks of a server
// that requires a session, and say what to send. Before, the POST got 404
// 'Invalid session ID', which tells a client that its session expired,
// and the DELETE 200, though it ended nothing. A POST in a session that
// does not exist still gets 404, and a 2026-07-28 request, which has no
// session, is still served.
func TestE2EHTTPRequestOutsideSessionIs400(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, nil)
	resp, body := rawRequest(t, http.MethodPost, base+"/mcp", `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, map[string]string{"Mcp-Protocol-Version": "2025-06-18"})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a POST of tools/list without a session got HTTP %d %q; want 400", resp.StatusCode, body)
	}
	if code, msg := rpcError(t, body); code != -32600 || !strings.Contains(msg, "no Mcp-Session-Id header") || !strings.Contains(msg, "POSTs initialize first") {
		t.Errorf("a POST without a session got %v %q; want -32600 saying to initialize first", code, msg)
	}
	resp, body = rawRequest(t, http.MethodDelete, base+"/mcp", "", nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "has no such header") {
		t.Errorf("a DELETE without a session got HTTP %d %q; want 400 saying that it names no session", resp.StatusCode, body)
	}
	resp, body = rawRequest(t, http.MethodPost, base+"/mcp", `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`, map[string]string{"Mcp-Session-Id": "mcp-session-not-one"})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a POST with a session ID that this server cannot have given got HTTP %d %q; want 404, which tells the client to initialize again", resp.StatusCode, body)
	}
	modern := `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"e2e-raw","version":"1"}}}}`
	resp, body = rawRequest(t, http.MethodPost, base+"/mcp", modern, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "run_python") {
		t.Errorf("a 2026-07-28 tools/list got HTTP %d %q; want the tools", resp.StatusCode, body)
	}
}

// TestE2EListWithForeignCursorSaysWhatToSend lists the tools with a cursor
// this server never gave: the Invalid Params error says so and to pass a
// previous answer's nextCursor, or none. Before, it said 'illegal base64
// data at input byte 4'.
func TestE2EListWithForeignCursorSaysWhatToSend(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, nil)
	r, _ := rawInitialize(t, base, nil)
	header := map[string]string{"Mcp-Session-Id": r.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": "2025-06-18"}
	_, body := rawRequest(t, http.MethodPost, base+"/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"garbage"}}`, header)
	if code, msg := rpcError(t, body); code != -32602 || !strings.Contains(msg, "not one this server gave") || !strings.Contains(msg, "nextCursor") {
		t.Fatalf("tools/list with a foreign cursor got %v %q; want -32602 saying to pass a previous nextCursor or none", code, msg)
	}
}
