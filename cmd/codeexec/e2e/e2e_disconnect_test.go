package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// rawMCP speaks MCP over streamable HTTP by hand, so that a test can drop
// a call's connection, which no client library lets it do.
type rawMCP struct {
	t       *testing.T
	url     string
	header  map[string]string // sent on every request
	session string            // Mcp-Session-Id, when the era has one
}

// legacyRaw initialises an MCP session of revision 2025-06-18.
func legacyRaw(t *testing.T, base string) *rawMCP {
	t.Helper()
	m := &rawMCP{t: t, url: base + "/mcp", header: map[string]string{}}
	resp := m.post(t.Context(), `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e-raw","version":"1"}}}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	m.session = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || m.session == "" {
		t.Fatalf("initialize: %s, session %q", resp.Status, m.session)
	}
	m.header["Mcp-Protocol-Version"] = "2025-06-18"
	resp = m.post(t.Context(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()
	return m
}

// modernRaw is a client of revision 2026-07-28, which has no session.
func modernRaw(t *testing.T, base string) *rawMCP {
	return &rawMCP{t: t, url: base + "/mcp", header: map[string]string{
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "run_python",
	}}
}

func (m *rawMCP) post(ctx context.Context, body string) *http.Response {
	m.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, strings.NewReader(body))
	if err != nil {
		m.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range m.header {
		req.Header.Set(k, v)
	}
	if m.session != "" {
		req.Header.Set("Mcp-Session-Id", m.session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		m.t.Fatalf("POST %s: %v", body, err)
	}
	return resp
}

// callBody is a tools/call of run_python with args, asking for progress.
func (m *rawMCP) callBody(id int, args map[string]any) string {
	params := map[string]any{"name": "run_python", "arguments": args, "_meta": map[string]any{"progressToken": fmt.Sprint("p", id)}}
	if m.session == "" {
		meta := params["_meta"].(map[string]any)
		meta["io.modelcontextprotocol/protocolVersion"] = "2026-07-28"
		meta["io.modelcontextprotocol/clientInfo"] = map[string]any{"name": "e2e-raw", "version": "1"}
		meta["io.modelcontextprotocol/clientCapabilities"] = map[string]any{}
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
	return string(b)
}

// started posts the call and runs during once its first progress
// notification has arrived, so that its code is running. If during
// returns true, started reads the rest of the call's stream and returns
// it; otherwise it drops the call's connection.
func (m *rawMCP) started(id int, args map[string]any, during func() (drain bool)) (rest string) {
	m.t.Helper()
	ctx, cancel := context.WithCancel(m.t.Context())
	defer cancel()
	resp := m.post(ctx, m.callBody(id, args))
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "data:") && strings.Contains(lines.Text(), "notifications/progress") {
			if !during() {
				return ""
			}
			b, _ := io.ReadAll(resp.Body)
			return string(b)
		}
	}
	m.t.Fatalf("call %d ended before its first progress notification: %s %v", id, resp.Status, lines.Err())
	return ""
}

// result makes a call and returns the text of its result.
func (m *rawMCP) result(id int, args map[string]any) string {
	m.t.Helper()
	resp := m.post(m.t.Context(), m.callBody(id, args))
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimPrefix(line, "data: ")
		var msg struct {
			ID     any            `json:"id"`
			Result map[string]any `json:"result"`
		}
		if json.Unmarshal([]byte(line), &msg) == nil && msg.Result != nil {
			return harness.ResultText(msg.Result)
		}
	}
	m.t.Fatalf("call %d: no result in %s %q", id, resp.Status, raw)
	return ""
}

// markedCode prints, so the call is seen running, then sleeps and sets
// marker; a call that is stopped never sets it.
const markedCode = "import time\nprint('started', flush=True)\ntime.sleep(2)\nmarker = 'kept'"

// Before 2026-07-28, a dropped connection is not a cancellation: the MCP
// transports say so (a client cancels with notifications/cancelled), and a
// proxy's idle timeout or a network change drops connections. The call
// runs to its end and its effects are kept, for the next call of the
// session to use. notifications/cancelled still stops a call, and under
// 2026-07-28, which makes closing the stream the way to cancel, a dropped
// connection does. Before, a dropped connection stopped the sandbox and
// rolled the session back: the next call got NameError for marker, with
// "[restored the session from its checkpoint (the previous call's sandbox
// stopped: the call was cancelled by the client ...".
func TestE2EHTTPDroppedConnectionIsNotACancellation(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, nil)
	t.Run("dropped", func(t *testing.T) {
		t.Parallel()
		m := legacyRaw(t, base)
		m.result(1, map[string]any{"code": "marker = 'before'"})
		m.started(2, map[string]any{"code": markedCode}, func() bool { return false })
		// The session's calls run one at a time, so this one sees the
		// dropped call's end.
		if got := m.result(3, map[string]any{"code": "print(marker)"}); got != "kept" {
			t.Fatalf("after the connection of a running call dropped, the next call printed %q; want %q, the effect of the dropped call", got, "kept")
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		m := legacyRaw(t, base)
		m.result(1, map[string]any{"code": "marker = 'before'"})
		rest := m.started(2, map[string]any{"code": markedCode}, func() bool {
			resp := m.post(t.Context(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"the user stopped it"}}`)
			resp.Body.Close()
			return true
		})
		// The cancelled request is not answered, as the specification
		// asks: its stream ends without a result.
		if strings.Contains(rest, `"result"`) {
			t.Errorf("the cancelled call 2 was answered on its stream:\n%s", rest)
		}
		got := m.result(3, map[string]any{"code": "print(marker)"})
		if !strings.HasPrefix(got, "before\n") || !strings.Contains(got, "the call was cancelled by the client") {
			t.Fatalf("after notifications/cancelled for a running call, the next call printed %q; want %q and the notice that the cancelled call was rolled back", got, "before")
		}
		if strings.Contains(got, "earlier state is gone") {
			t.Errorf("the restored session is said to have lost its state: %s", got)
		}
	})
	t.Run("2026-07-28", func(t *testing.T) {
		t.Parallel()
		m := modernRaw(t, base)
		first := m.result(1, map[string]any{"code": "marker = 'before'"})
		_, handle, ok := strings.Cut(first, `pass session="`)
		if !ok {
			t.Fatalf("the first call's result names no session handle: %q", first)
		}
		handle, _, _ = strings.Cut(handle, `"`)
		m.started(2, map[string]any{"code": markedCode, "session": handle}, func() bool { return false })
		got := m.result(3, map[string]any{"code": "print(marker)", "session": handle})
		if !strings.HasPrefix(got, "before\n") || !strings.Contains(got, "the call was cancelled by the client") {
			t.Fatalf("under 2026-07-28, after the stream of a running call closed, the next call printed %q; want %q and the notice that the call was rolled back", got, "before")
		}
	})
}

// TestE2EStdioCancelledCallIsNotAnswered cancels a running call over
// stdio, as the TypeScript SDK does when its caller aborts: the sandbox
// stops and the session goes on, and the cancelled request gets no
// answer, as the specification asks. Before, it was answered ('the call
// was cancelled'), and the SDK, which had forgotten the request, reported
// "Received a response for an unknown message ID" to its onerror on every
// cancellation.
func TestE2EStdioCancelledCallIsNotAnswered(t *testing.T) {
	t.Parallel()
	s := harness.StartRawStdio(t, harness.BaseEnv(t, nil))
	stdin, lines := s.Stdin, s.Lines
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = s.Cmd.Wait()
		if t.Failed() {
			t.Logf("codeexec output:\n%s", harness.TailOf(s.Logs.String(), 6000))
		}
	})
	send := func(msg string) {
		if _, err := io.WriteString(stdin, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	// next returns the next message from the server that is not a
	// progress notification.
	next := func() map[string]any {
		for lines.Scan() {
			var m map[string]any
			if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
				t.Fatalf("the server wrote %q: %v", lines.Text(), err)
			}
			if m["method"] != "notifications/progress" {
				return m
			}
		}
		t.Fatalf("the server's stdout ended: %v", lines.Err())
		return nil
	}
	send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e-raw","version":"1"}}}`)
	if m := next(); m["id"] != "init" {
		t.Fatalf("answer to initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"marker = 'before'"}}}`)
	if m := next(); m["id"] != float64(1) {
		t.Fatalf("answer to call 1: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"` +
		`import time\nprint('started', flush=True)\ntime.sleep(30)\nmarker = 'kept'"},"_meta":{"progressToken":"p2"}}}`)
	for lines.Scan() {
		if strings.Contains(lines.Text(), `"notifications/progress"`) {
			break // call 2 is running
		}
	}
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"the user stopped it"}}`)
	// The session's calls run one at a time, and a ping is answered at
	// once: by the answer to the ping after call 3, call 2 has long ended.
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(marker)"}}}`)
	var got []map[string]any
	for m := next(); ; m = next() {
		got = append(got, m)
		if m["id"] == float64(3) {
			send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
		}
		if m["id"] == float64(4) {
			break
		}
	}
	for _, m := range got {
		switch m["id"] {
		case float64(2):
			t.Errorf("the cancelled call 2 was answered: %v", m)
		case float64(3):
			res, _ := m["result"].(map[string]any)
			if text := harness.ResultText(res); !strings.HasPrefix(text, "before\n") || !strings.Contains(text, "the call was cancelled by the client") {
				t.Errorf("the call after the cancelled one = %q; want it to print %q, with the notice that the cancelled call was rolled back", text, "before")
			}
		}
	}
}
